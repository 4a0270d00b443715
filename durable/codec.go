package durable

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// Codec turns requests into payload bytes and back.
type Codec interface {
	Marshal(v any) ([]byte, error)      // v is a request pointer
	Unmarshal(data []byte, v any) error // v points to a new request value
}

// JSONCodec encodes with encoding/json; the default Codec. By default it ignores payload fields
// the type lacks: during a rolling deploy, an instance of the previous version must not turn
// items with an added field into dead letters (the price: a removed field is dropped silently).
type JSONCodec struct {
	// Strict rejects payload fields the type lacks, for instances that always run one version
	// of the types, or where losing a renamed field is worse than a dead letter.
	Strict bool
}

// Marshal implements Codec.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements Codec: data is one JSON value, then only whitespace.
func (c JSONCodec) Unmarshal(data []byte, v any) error {
	if !c.Strict {
		// json.Unmarshal validates the whole input, trailing data included, and decodes
		// straight from data without copying it.
		return json.Unmarshal(data, v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return fmt.Errorf("trailing data after the JSON value at offset %d", len(data)-len(rest))
	}
	return nil
}

// registry maps stable names to request types and their codecs.
type registry struct {
	mu     sync.RWMutex
	byName map[string]*registration
	byType map[reflect.Type]*registration
	sealed atomic.Bool  // a built mediator's deferral decided its request types (see seal)
	def    retry.Policy // the queue's policy, of the registrations without WithPolicy
	// failed are the errors of the registrations and schedules that failed, which Start and
	// the deferral's Validate report too: a setup error that was not checked is not lost.
	failed []error
}

type registration struct {
	name   string
	typ    reflect.Type // pointer type, as sent
	codec  Codec
	policy retry.Policy // WithPolicy's, until register merges it over the queue's
	hasPol bool
	guard  *guard // WithBreaker's; nil: Config.Breakers, if set, guards the items
	// uniqueFor is WithUniqueWindow's: how long its items' dedupe keys are held after they
	// succeeded.
	uniqueFor time.Duration
	budget    *budget.Budget // WithRetryBudget's; nil: the pipeline's retry behavior's
	over      OverBudget     // WithRetryBudget's
	priority  int            // WithDefaultPriority's
	fairness  *fairness      // WithFairness's; nil: the enqueue's, the request's or the guard's key
}

// guard is the circuit breaker that guards a registration's items (WithBreaker).
type guard struct {
	reg     *breaker.Registry
	keyType reflect.Type         // the request type key takes
	key     func(req any) string // nil: reg.KeyOf
}

// keyOf returns the key of req's breaker.
func (g *guard) keyOf(req any) string {
	if g.key == nil {
		return g.reg.KeyOf(req)
	}
	return g.key(req)
}

// newRegistry returns an empty registry whose registrations' policies are def, the queue's,
// with their WithPolicy over it.
func newRegistry(def retry.Policy) *registry {
	return &registry{byName: map[string]*registration{}, byType: map[reflect.Type]*registration{}, def: def}
}

// RegisterOption configures one registration.
type RegisterOption func(*registration)

// WithCodec sets the codec of the registration. Default JSONCodec.
func WithCodec(c Codec) RegisterOption { return func(r *registration) { r.codec = c } }

// WithPolicy sets the retry policy of the registration's items; its set fields win over
// Config.Policy's, field by field.
func WithPolicy(p retry.Policy) RegisterOption {
	return func(r *registration) { r.policy, r.hasPol = p, true }
}

// WithBreaker names the circuit breaker that guards the registration's items: reg, under the key
// key gives the item's request (or the key its enqueue named, WithBreakerKey). Before each
// attempt the scheduler asks that breaker: while it is open the item is not attempted (no
// attempt is charged) and waits, parked on the key, until the breaker may let a probe through;
// while it is half-open only as many parked items run as it has probe slots, and the rest wait
// for the probes' verdict; when it closes (or is reset), the items parked on it are due at
// once. So a request whose handler calls a remote endpoint, such as an outbound HTTP call
// through a per-host breaker, is held back by that endpoint's breaker: key maps the request to
// the key the pipeline's breaker gives the call, for example
//
//	durable.WithBreaker(hosts, func(d *Deliver) string { return httpcall.AuthorityOf(d.URL) })
//
// A key of "" means no breaker guards that item. nil key: reg's own key function
// (Registry.KeyOf). Without WithBreaker, Config.Breakers, when set, guards the items
// under its own key function. Q must be the registered request type; Register fails
// otherwise. The scheduler also listens to reg, so the items a refusal of reg's parked (an
// inner call of the handler refused) are freed when that breaker closes.
func WithBreaker[Q any](reg *breaker.Registry, key func(Q) string) RegisterOption {
	g := &guard{reg: reg, keyType: reflect.TypeFor[Q]()}
	if key != nil {
		g.key = func(req any) string { return key(req.(Q)) }
	}
	return func(r *registration) { r.guard = g }
}

// Register registers request type Q (a pointer: *SendInvoice) on q under name, in every
// instance whose scheduler may find the name; keep names stable across Go renames. It returns
// an error naming the mistake, and registers nothing: Q not a pointer, an empty or taken name
// or type, an invalid option (WithPolicy's policy, WithBreaker's registry or key function), or
// a call after a Build that included q's deferral. The error is kept too: Start refuses to run,
// and a mediator's Build that includes q's deferral fails, with every registration error, so a
// registration whose error went unchecked is not silently missing.
func Register[Q any](q *Queue, name string, opts ...RegisterOption) error {
	if q == nil {
		return errors.New("durable: Register: nil queue")
	}
	return q.reg.keep(q.reg.register(reflect.TypeFor[Q](), name, opts))
}

// keep records err, a failed registration's or schedule's, for problems, and returns it.
func (r *registry) keep(err error) error {
	if err != nil {
		r.mu.Lock()
		r.failed = append(r.failed, err)
		r.mu.Unlock()
	}
	return err
}

// problems returns the errors of the registrations and schedules that failed, joined; nil when
// none did.
func (r *registry) problems() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return errors.Join(r.failed...)
}

func (r *registry) register(t reflect.Type, name string, opts []RegisterOption) error {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() == reflect.Pointer {
		return fmt.Errorf("durable: Register %s: the request type must be a pointer type, as it is sent (*SendInvoice, not SendInvoice)", t)
	}
	if name == "" {
		return fmt.Errorf("durable: Register %s: empty name", t)
	}
	reg, err := r.configure(t, name, opts)
	r.mu.Lock()
	defer r.mu.Unlock()
	// A registration that cannot be made at all says so first, beside its options' mistakes.
	if r.sealed.Load() {
		return errors.Join(fmt.Errorf("durable: Register %s: the queue is in use: a mediator whose pipelines include its deferral was built, and Build decided which request types it defers; register every request type before Build", t), err)
	}
	if old, ok := r.byName[name]; ok {
		return errors.Join(fmt.Errorf("durable: Register %s: name %q is already used by %s", t, name, old.typ), err)
	}
	if old, ok := r.byType[t]; ok {
		return errors.Join(fmt.Errorf("durable: Register %s: already registered as %q", t, old.name), err)
	}
	if err != nil {
		return err
	}
	r.byName[name] = reg
	r.byType[t] = reg
	return nil
}

// configure returns the registration of t under name with opts, or the mistake of its
// options.
func (r *registry) configure(t reflect.Type, name string, opts []RegisterOption) (*registration, error) {
	reg := &registration{name: name, typ: t, codec: JSONCodec{}}
	for _, o := range opts {
		o(reg)
	}
	if reg.codec == nil {
		reg.codec = JSONCodec{}
	}
	if g := reg.guard; g != nil {
		switch {
		case g.reg == nil:
			return nil, fmt.Errorf("durable: Register %s: WithBreaker: nil registry", t)
		case g.keyType != t:
			return nil, fmt.Errorf("durable: Register %s: WithBreaker: the key function takes %s, not the registered type", t, g.keyType)
		}
	}
	if reg.uniqueFor < 0 {
		return nil, fmt.Errorf("durable: Register %s: WithUniqueWindow %v is negative", t, reg.uniqueFor)
	}
	if err := checkFairness(reg); err != nil {
		return nil, err
	}
	if reg.hasPol {
		// Over the queue's policy: a layer's BaseDelay beyond the MaxDelay below it is a
		// mistake too.
		if err := r.def.Merge(reg.policy).Validate(); err != nil {
			return nil, fmt.Errorf("durable: Register %s: WithPolicy: %w", t, err)
		}
		reg.policy = r.def.Merge(reg.policy)
	} else {
		reg.policy = r.def
	}
	return reg, nil
}

// seal closes the registry to new registrations: a built mediator's deferral decided which
// request types it applies to.
func (r *registry) seal() { r.sealed.Store(true) }

func (r *registry) lookupType(t reflect.Type) *registration {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byType[t]
}

func (r *registry) lookupName(name string) *registration {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byName[name]
}

// has reports whether request type t (as sent) is registered.
func (r *registry) has(t reflect.Type) bool { return r.lookupType(t) != nil }

// unknownType is the error of a request of type t, which is not registered: it says so when
// t's pointer is (a request passed by value).
func (r *registry) unknownType(t reflect.Type) error {
	if t.Kind() != reflect.Pointer && r.lookupType(reflect.PointerTo(t)) != nil {
		return &unknownRequestError{Type: t.String(), Hint: "*" + t.String() + " is: pass a pointer"}
	}
	return &unknownRequestError{Type: t.String()}
}

// nameOf returns the name req's type is registered under.
func (r *registry) nameOf(req any) (string, bool) {
	reg := r.lookupType(reflect.TypeOf(req))
	if reg == nil {
		return "", false
	}
	return reg.name, true
}

// encode returns the registered name and encoded payload of req. A nil req, or a nil pointer,
// gets an error matching mediator.ErrNilRequest: it would be stored as an empty payload and
// later dispatched as a zero request. An unregistered type gets an error matching ErrUnknownRequest;
// a codec that fails or panics one matching ErrEncode, which unwraps to the codec's error.
func (r *registry) encode(req any) (name string, payload []byte, err error) {
	if req == nil {
		return "", nil, fmt.Errorf("durable: cannot encode a nil request: %w", mediator.ErrNilRequest)
	}
	t := reflect.TypeOf(req)
	if t.Kind() == reflect.Pointer && reflect.ValueOf(req).IsNil() {
		return "", nil, fmt.Errorf("durable: cannot encode a nil %s: %w", t, mediator.ErrNilRequest)
	}
	reg := r.lookupType(t)
	if reg == nil {
		return "", nil, r.unknownType(t)
	}
	defer func() {
		if p := recover(); p != nil {
			name, payload, err = "", nil, &encodeError{Name: reg.name, Err: fmt.Errorf("codec panicked: %v", p)}
		}
	}()
	payload, err = reg.codec.Marshal(req)
	if err != nil {
		return "", nil, &encodeError{Name: reg.name, Err: err}
	}
	return reg.name, payload, nil
}

// decode returns a new request value (a pointer of the registered type) decoded from payload.
// An unknown name gets an error matching ErrUnknownRequest; a payload that does not decode,
// or a codec that panics on it, one matching ErrDecode (unwrapping to the codec's error).
func (r *registry) decode(name string, payload []byte) (req any, err error) {
	reg := r.lookupName(name)
	if reg == nil {
		return nil, &unknownRequestError{Name: name}
	}
	defer func() {
		if p := recover(); p != nil {
			req, err = nil, &decodeError{Name: name, Err: fmt.Errorf("codec panicked: %v", p)}
		}
	}()
	v := reflect.New(reg.typ.Elem())
	if err := reg.codec.Unmarshal(payload, v.Interface()); err != nil {
		return nil, &decodeError{Name: name, Err: err}
	}
	return v.Interface(), nil
}

// uniqueFor returns the WithUniqueWindow of the registration of name; zero when none.
func (r *registry) uniqueFor(name string) time.Duration {
	if reg := r.lookupName(name); reg != nil {
		return reg.uniqueFor
	}
	return 0
}

// policyFor returns the policy of the registration of name (merged at registration); the
// queue's policy for a name not registered.
func (r *registry) policyFor(name string) retry.Policy {
	if reg := r.lookupName(name); reg != nil {
		return reg.policy
	}
	return r.def
}
