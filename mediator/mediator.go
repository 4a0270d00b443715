package mediator

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/samber/do/v2"
	"go.uber.org/zap"
)

// Sender sends requests. Application code that only sends depends on Sender.
type Sender interface {
	// SendAny dispatches req (a pointer to a request type) and returns its response.
	// Prefer the typed Send function.
	SendAny(ctx context.Context, req any) (any, error)
}

// Publisher publishes notifications. Application code that only publishes depends on Publisher.
type Publisher interface {
	// PublishAny delivers n to every handler of its type using strategy s; the zero PublishStrategy
	// means the publisher's default. Prefer the typed Publish function.
	PublishAny(ctx context.Context, n any, s PublishStrategy) error
}

// Streamer opens streams. Application code that only streams depends on Streamer.
type Streamer interface {
	// StreamAny dispatches a stream request and returns its items. Prefer the typed Stream
	// function.
	StreamAny(ctx context.Context, req any) iter.Seq2[any, error]
}

// Mediator dispatches requests, stream requests and notifications to handlers resolved from a
// do.Injector, through pipelines of behaviors. Register handlers and behaviors, call Build
// once, then dispatch from any number of goroutines. A Mediator implements Sender, Publisher
// and Streamer.
type Mediator struct {
	injector do.Injector
	config   Config

	mu        sync.Mutex
	built     bool
	seq       int
	problems  []error
	requests  map[reflect.Type]*requestReg
	streams   map[reflect.Type]*requestReg
	notifs    map[reflect.Type]*notifReg
	behaviors []behaviorReg
	streamBs  []behaviorReg
	observers []any // Observe's

	table atomic.Pointer[table]

	// fire-and-forget tracking
	closeMu  sync.RWMutex
	closed   bool
	inflight sync.WaitGroup
	running  atomic.Int64 // fire-and-forget handlers still running
	life     context.Context
	endLife  context.CancelFunc
}

// Config configures a Mediator. The zero value of each field means its documented default, so
// mediator.Config{} is a complete configuration.
type Config struct {
	// PublishStrategy is how Publish delivers a notification when the call does not choose
	// (PublishWith). Default StopOnFirstError: like a plain loop of calls, the first failure
	// is the caller's answer and no later handler runs on top of a broken step.
	PublishStrategy PublishStrategy
	// ErrorSink are the observers of the errors of fire-and-forget handlers, which have no
	// caller to return them to. They are called in the order listed, on the handler's
	// goroutine; one that panics is recovered and logged to Logger, and the next one is
	// called. Default (empty): each error logged to Logger at error level, with the
	// notification's type.
	ErrorSink []func(ctx context.Context, n any, err error)
	// Logger is where the default ErrorSink writes, and where a panicking ErrorSink observer
	// is reported.
	// Default zap.L() as it is when New is called: a no-op until the application installs its
	// logger with zap.ReplaceGlobals, so the mediator follows the application's choice and
	// never prints on its own.
	Logger *zap.Logger
	// RequireNotificationHandlers makes Publish of a notification type with no handler fail
	// with a NoHandlerError. Default false: a notification nobody listens to is not an error,
	// as with an event bus.
	RequireNotificationHandlers bool
}

// New returns a Mediator that resolves handlers from i. A nil i gets a new injector. The
// mediator provides itself to i as *Mediator, Sender, Publisher and Streamer (unless i already
// holds them), so handler constructors can depend on it.
func New(i do.Injector, cfg Config) *Mediator {
	if i == nil {
		i = do.New()
	}
	if cfg.PublishStrategy == (PublishStrategy{}) {
		cfg.PublishStrategy = StopOnFirstError
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.L()
	}
	cfg.ErrorSink = slices.Clone(cfg.ErrorSink)
	if len(cfg.ErrorSink) == 0 {
		log := cfg.Logger
		cfg.ErrorSink = []func(context.Context, any, error){func(_ context.Context, n any, err error) {
			log.Error("mediator: notification handler failed", zap.String("notification", fmt.Sprintf("%T", n)), zap.Error(err))
		}}
	}
	m := &Mediator{
		injector: i,
		config:   cfg,
		requests: map[reflect.Type]*requestReg{},
		streams:  map[reflect.Type]*requestReg{},
		notifs:   map[reflect.Type]*notifReg{},
	}
	m.life, m.endLife = context.WithCancel(context.Background())
	provideSelf(i, m)
	return m
}

// provideSelf makes m injectable into the handlers it resolves: as *Mediator, Sender, Publisher
// and Streamer, so a handler that sends or publishes takes one of them in its constructor. A
// service the injector (or a parent scope) already holds is left alone: when mediators share
// an injector, the first one created is the one injected; give each its own scope
// (injector.Scope(name)) for each to inject itself.
func provideSelf(i do.Injector, m *Mediator) {
	have := map[string]bool{}
	for _, d := range i.ListProvidedServices() {
		have[d.Service] = true
	}
	provide := func(name string, fn func()) {
		if !have[name] {
			fn()
		}
	}
	provide(do.NameOf[*Mediator](), func() { do.ProvideValue(i, m) })
	provide(do.NameOf[Sender](), func() { do.ProvideValue[Sender](i, m) })
	provide(do.NameOf[Publisher](), func() { do.ProvideValue[Publisher](i, m) })
	provide(do.NameOf[Streamer](), func() { do.ProvideValue[Streamer](i, m) })
}

// Injector returns the injector handlers are resolved from.
func (m *Mediator) Injector() do.Injector { return m.injector }

type requestReg struct {
	info     RequestInfo
	handlers []func(do.Injector) (any, error) // returns a resolvedHandler or a stream handler (a streamPipe)
}

type notifReg struct {
	typ      reflect.Type
	handlers []func(do.Injector) (notifCall, error)
}

type notifCall func(ctx context.Context, n any) error

type behaviorReg struct {
	b      any // Behavior or StreamBehavior
	config behaviorConfig
	seq    int
}

type table struct {
	requests typeIndex[route]
	streams  typeIndex[streamEntry]
	notifs   typeIndex[[]notifCall]
	byType   map[reflect.Type]Chain
	infos    []RequestInfo
	direct   map[reflect.Type]any // Handler[Q, R] of request types without behaviors
	// pipelines holds the behaviors bound into each request type's pipeline, outermost first.
	pipelines map[reflect.Type][]Behavior
}

// resolvedHandler is a request handler resolved at Build: its pipeline terminal and the typed
// handler itself.
type resolvedHandler struct {
	call  Next
	typed any
	bare  any // a func(context.Context, any) (R, error): see route
}

func resolved[Q Request[R], R any](h Handler[Q, R]) resolvedHandler {
	return resolvedHandler{call: terminal[Q, R](h), typed: h, bare: bareSend[Q, R](h)}
}

// route is what a request type resolves to at dispatch: its pipeline and, when the pipeline is
// the handler alone, bare, a func(context.Context, any) (R, error) built by bareSend for the
// type's Q and R. Send[R] asserts it to that type (a comparison of type words) and calls it:
// the table is keyed by the request's dynamic type Q, and Q's embedded Returns[R] fixes R
// (responseOf(R) has one signature per type), so the R of a Send that found the entry is the
// R the func was built with. It spares the bare path the untyped pipeline's boxing of the
// response and Send's assertion of it back to R.
type route struct {
	call Next
	bare any
}

// bareSend returns the typed dispatch of a request type without behaviors, for route. It makes
// Send's checks in Send's order, then calls h under the panic guard.
//
// The guard, here and in TypedSender.Send, is a deferred closure that calls recover only when
// the handler did not return: the exit of every call runs the closure, and the flag spares it
// the call into the runtime that recover is (a named function deferred with arguments would be
// wrapped in a closure by the compiler: one call more). A handler that panics never assigns the response,
// so the response result is still its zero value when the guard sets the error.
func bareSend[Q Request[R], R any](h Handler[Q, R]) any {
	f := func(ctx context.Context, req any) (resp R, err error) {
		// nilData written out: the compiler does not inline it into this closure.
		if (*eface)(unsafe.Pointer(&req)).data == nil && isNilPointer(req) {
			return resp, nilRequest(req)
		}
		if ctx == nil || ctx.Err() != nil {
			return resp, doneErr(ctx)
		}
		returned := false
		defer func() {
			if !returned {
				if p := recover(); p != nil {
					err = NewPanicError(p)
				}
			}
		}()
		resp, err = h.Handle(ctx, req.(Q))
		returned = true
		return resp, err
	}
	return f
}

// register runs fn under the registration lock. Registering after Build is a programming
// error (the pipelines are composed and dispatch may be under way), so it panics, naming the
// call, as net/http's ServeMux does for a bad pattern.
func (m *Mediator) register(what string, fn func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.built {
		panic(fmt.Sprintf("mediator: %s after Build: register every handler and behavior before Build (%v)", what, ErrRegistrationClosed))
	}
	fn()
}

// providedNames numbers the names under which handler constructors are provided to injectors.
// It is shared by every Mediator, so that mediators sharing one injector (one per module of an
// application, or several in a test) do not provide two services under one name, which the
// injector refuses with a panic.
var providedNames atomic.Uint64

func (m *Mediator) nextName(kind string, t reflect.Type) string {
	return fmt.Sprintf("switchboard.%s[%s]#%d", kind, t, providedNames.Add(1))
}

func (m *Mediator) addRequest(regs map[reflect.Type]*requestReg, info RequestInfo, h func(do.Injector) (any, error)) {
	r := regs[info.Request]
	if r == nil {
		r = &requestReg{info: info}
		regs[info.Request] = r
	}
	if h != nil {
		r.handlers = append(r.handlers, h)
	}
}

// Handle registers the handler constructor ctor for request type Q into the mediator's injector.
// Build calls ctor once (with dependencies injected by the injector) and uses the handler for
// every dispatch. Register exactly one handler per request type:
//
//	mediator.Handle[*GetUser, *User](m, NewGetUserHandler)
//
// Problems (a second handler, a failing constructor) are reported by Build. Registering after
// Build panics.
func Handle[Q Request[R], R any, H Handler[Q, R]](m *Mediator, ctor do.Provider[H]) {
	info := requestInfo[Q, R]()
	m.register("Handle["+info.Request.String()+"]", func() {
		name := m.nextName("handler", info.Request)
		do.ProvideNamed(m.injector, name, ctor)
		m.addRequest(m.requests, info, func(i do.Injector) (any, error) {
			h, err := do.InvokeNamed[H](i, name)
			if err != nil {
				return nil, err
			}
			return resolved[Q, R](h), nil
		})
	})
}

// HandleFunc registers a function as the handler of request type Q. Q and R are inferred.
func HandleFunc[Q Request[R], R any](m *Mediator, fn func(ctx context.Context, req Q) (R, error)) {
	info := requestInfo[Q, R]()
	m.register("HandleFunc["+info.Request.String()+"]", func() {
		m.addRequest(m.requests, info, func(do.Injector) (any, error) {
			return resolved[Q, R](HandlerFunc[Q, R](fn)), nil
		})
	})
}

// HandleStream registers the handler constructor of stream request type Q.
func HandleStream[Q StreamRequest[T], T any, H StreamHandler[Q, T]](m *Mediator, ctor do.Provider[H]) {
	info := streamInfo[Q, T]()
	m.register("HandleStream["+info.Request.String()+"]", func() {
		name := m.nextName("stream", info.Request)
		do.ProvideNamed(m.injector, name, ctor)
		m.addRequest(m.streams, info, func(i do.Injector) (any, error) {
			h, err := do.InvokeNamed[H](i, name)
			if err != nil {
				return nil, err
			}
			return streamTerminal[Q, T](h), nil
		})
	})
}

// HandleStreamFunc registers a function as the handler of stream request type Q.
func HandleStreamFunc[Q StreamRequest[T], T any](m *Mediator, fn func(ctx context.Context, req Q) iter.Seq2[T, error]) {
	info := streamInfo[Q, T]()
	m.register("HandleStreamFunc["+info.Request.String()+"]", func() {
		m.addRequest(m.streams, info, func(do.Injector) (any, error) {
			return streamTerminal[Q, T](StreamHandlerFunc[Q, T](fn)), nil
		})
	})
}

// Subscribe registers a handler constructor for notification type N. A notification type may
// have any number of handlers; Publish calls them in registration order.
func Subscribe[N any, H NotificationHandler[N]](m *Mediator, ctor do.Provider[H]) {
	t := reflect.TypeFor[N]()
	m.register("Subscribe["+t.String()+"]", func() {
		name := m.nextName("notification", t)
		do.ProvideNamed(m.injector, name, ctor)
		m.addNotif(t, func(i do.Injector) (notifCall, error) {
			h, err := do.InvokeNamed[H](i, name)
			if err != nil {
				return nil, err
			}
			return notifTerminal[N](h), nil
		})
	})
}

// SubscribeFunc registers a function as a handler of notification type N.
func SubscribeFunc[N any](m *Mediator, fn func(ctx context.Context, n N) error) {
	t := reflect.TypeFor[N]()
	m.register("SubscribeFunc["+t.String()+"]", func() {
		m.addNotif(t, func(do.Injector) (notifCall, error) {
			return notifTerminal[N](NotificationHandlerFunc[N](fn)), nil
		})
	})
}

func (m *Mediator) addNotif(t reflect.Type, h func(do.Injector) (notifCall, error)) {
	r := m.notifs[t]
	if r == nil {
		r = &notifReg{typ: t}
		m.notifs[t] = r
	}
	r.handlers = append(r.handlers, h)
}

// Declare records that request or stream request type Q must have a handler: Build fails with a
// NoHandlerError if none was registered. Packages that send a request can declare it so a
// missing registration is found at startup rather than at the first dispatch.
func Declare[Q any](m *Mediator) {
	t := reflect.TypeFor[Q]()
	var sample any = *new(Q)
	if t.Kind() == reflect.Pointer {
		sample = reflect.New(t.Elem()).Interface() // the methods must not see a nil pointer
	}
	switch v := sample.(type) {
	case requestMarker:
		info := RequestInfo{Request: t, Response: v.responseType()}
		m.register("Declare["+t.String()+"]", func() { m.addRequest(m.requests, info, nil) })
		return
	case streamMarker:
		info := RequestInfo{Request: t, Response: v.itemType(), Stream: true}
		m.register("Declare["+t.String()+"]", func() { m.addRequest(m.streams, info, nil) })
		return
	}
	err := fmt.Errorf("mediator: Declare: %s is neither a request (embeds Returns) nor a stream request (embeds Yields)", t)
	m.register("Declare["+t.String()+"]", func() { m.problems = append(m.problems, err) })
}

// Use adds a behavior to the pipelines of request types. Where options and the behavior's own
// description (its Placement and AppliesTo methods) disagree, the options win. A nil behavior
// is reported by Build; Use after Build panics.
func (m *Mediator) Use(b Behavior, opts ...Option) {
	m.use("Use", &m.behaviors, b, opts)
}

// UseStream adds a stream behavior to the pipelines of stream request types. It follows the
// rules of Use.
func (m *Mediator) UseStream(b StreamBehavior, opts ...Option) {
	m.use("UseStream", &m.streamBs, b, opts)
}

func (m *Mediator) use(what string, list *[]behaviorReg, b any, opts []Option) {
	if isNil(b) {
		m.register(what, func() {
			m.problems = append(m.problems, &BehaviorError{Behavior: "<nil>", Err: errors.New("behavior is nil")})
		})
		return
	}
	var c behaviorConfig
	if p, ok := b.(PlacedBehavior); ok {
		pl := p.Placement()
		c.name, c.stage, c.order = pl.Name, pl.Stage, pl.Order
	}
	for _, o := range opts {
		o(&c)
	}
	if c.stage == 0 {
		c.stage = StageDefault
	}
	if c.name == "" {
		c.name = behaviorName(b)
	}
	m.register(what+"("+c.name+")", func() {
		m.seq++
		*list = append(*list, behaviorReg{b: b, config: c, seq: m.seq})
	})
}

// isNil reports whether v is nil or holds a nil pointer, function, map, slice or channel.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

func requestInfo[Q Request[R], R any]() RequestInfo {
	return RequestInfo{Request: reflect.TypeFor[Q](), Response: reflect.TypeFor[R]()}
}

func streamInfo[Q StreamRequest[T], T any]() RequestInfo {
	return RequestInfo{Request: reflect.TypeFor[Q](), Response: reflect.TypeFor[T](), Stream: true}
}
