package durable

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
)

// Codec turns requests into payload bytes and back.
type Codec interface {
	// Marshal encodes v, a request pointer.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into v, a pointer to a new request value.
	Unmarshal(data []byte, v any) error
}

// JSONCodec encodes with encoding/json; the default Codec. Unknown fields are rejected when
// decoding, so a payload written for a changed type fails loudly instead of silently losing
// data.
type JSONCodec struct{}

// Marshal implements Codec.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements Codec.
func (JSONCodec) Unmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// Registry maps stable names to request types and their codecs. A request type must be
// registered before it can be enqueued or deferred, and every instance that runs a scheduler
// must register the names it will find in the store. Names are stored with each item, so keep
// them stable across renames of the Go type.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]*registration
	byType map[reflect.Type]*registration
}

type registration struct {
	name   string
	typ    reflect.Type // pointer type, as sent
	codec  Codec
	policy Policy
	hasPol bool
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]*registration{}, byType: map[reflect.Type]*registration{}}
}

// RegisterOption configures one registration.
type RegisterOption func(*registration)

// WithCodec sets the codec of the registration. Default JSONCodec.
func WithCodec(c Codec) RegisterOption { return func(r *registration) { r.codec = c } }

// WithPolicy sets the retry policy of the registration's items. Default: the Queue's policy.
func WithPolicy(p Policy) RegisterOption {
	return func(r *registration) { r.policy, r.hasPol = p, true }
}

// Register registers request type Q (a pointer type, as sent: *SendInvoice) under name. A name
// or type can be registered once.
func Register[Q any](r *Registry, name string, opts ...RegisterOption) error {
	t := reflect.TypeFor[Q]()
	if t.Kind() != reflect.Pointer || t.Elem().Kind() == reflect.Pointer {
		return fmt.Errorf("durable: Register %s: the request type must be a pointer to a struct or value type", t)
	}
	if name == "" {
		return fmt.Errorf("durable: Register %s: empty name", t)
	}
	reg := &registration{name: name, typ: t, codec: JSONCodec{}}
	for _, o := range opts {
		o(reg)
	}
	if reg.codec == nil {
		reg.codec = JSONCodec{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byName[name]; ok {
		return fmt.Errorf("durable: Register %s: name %q is already used by %s", t, name, old.typ)
	}
	if old, ok := r.byType[t]; ok {
		return fmt.Errorf("durable: Register %s: already registered as %q", t, old.name)
	}
	r.byName[name] = reg
	r.byType[t] = reg
	return nil
}

// MustRegister is Register that panics on error, for package-level setup.
func MustRegister[Q any](r *Registry, name string, opts ...RegisterOption) {
	if err := Register[Q](r, name, opts...); err != nil {
		panic(err)
	}
}

func (r *Registry) lookupType(t reflect.Type) *registration {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byType[t]
}

func (r *Registry) lookupName(name string) *registration {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byName[name]
}

// Has reports whether request type t (as sent) is registered.
func (r *Registry) Has(t reflect.Type) bool { return r.lookupType(t) != nil }

// NameOf returns the name req's type is registered under.
func (r *Registry) NameOf(req any) (string, bool) {
	reg := r.lookupType(reflect.TypeOf(req))
	if reg == nil {
		return "", false
	}
	return reg.name, true
}

// Encode returns the registered name and encoded payload of req. An unregistered type gets an
// *UnknownRequestError.
func (r *Registry) Encode(req any) (name string, payload []byte, err error) {
	reg := r.lookupType(reflect.TypeOf(req))
	if reg == nil {
		return "", nil, &UnknownRequestError{Type: fmt.Sprintf("%T", req)}
	}
	payload, err = reg.codec.Marshal(req)
	if err != nil {
		return "", nil, fmt.Errorf("durable: encoding %s: %w", reg.name, err)
	}
	return reg.name, payload, nil
}

// Decode returns a new request value (a pointer of the registered type) decoded from payload.
// An unknown name gets an *UnknownRequestError, a payload that does not decode a *DecodeError;
// so does a codec that panics on the payload.
func (r *Registry) Decode(name string, payload []byte) (req any, err error) {
	reg := r.lookupName(name)
	if reg == nil {
		return nil, &UnknownRequestError{Name: name}
	}
	defer func() {
		if p := recover(); p != nil {
			req, err = nil, &DecodeError{Name: name, Err: fmt.Errorf("codec panicked: %v", p)}
		}
	}()
	v := reflect.New(reg.typ.Elem())
	if err := reg.codec.Unmarshal(payload, v.Interface()); err != nil {
		return nil, &DecodeError{Name: name, Err: err}
	}
	return v.Interface(), nil
}

// policyFor returns the registration's policy for name, or def.
func (r *Registry) policyFor(name string, def Policy) Policy {
	if reg := r.lookupName(name); reg != nil && reg.hasPol {
		return reg.policy
	}
	return def
}
