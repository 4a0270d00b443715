package behaviors

import "fmt"

// Switch is a policy flag that a later layer can turn off as well as on. The zero Switch is
// unset, so that a layer that says nothing about a flag keeps the value of the layer below.
type Switch uint8

const (
	// On turns a flag on.
	On Switch = iota + 1
	// Off turns a flag off.
	Off
)

// String returns "on", "off" or "unset".
func (s Switch) String() string {
	switch s {
	case 0:
		return "unset"
	case On:
		return "on"
	case Off:
		return "off"
	}
	return fmt.Sprintf("Switch(%d)", uint8(s))
}
