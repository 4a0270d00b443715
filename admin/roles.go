package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Role is what a principal may do on the admin surface. The roles are ordered: each may do
// what the ones below it may.
//
// The zero value is RoleViewer, the least: an Authorizer that forgets to set a role grants
// reading, never a change. docs/operations.md lists the role each route needs.
type Role int

const (
	// RoleViewer reads everything (breakers, dead letters, items, schedules, pauses, limits,
	// the audit log, metrics) and changes nothing: what a monitoring script, a CLI that
	// reports, or a colleague on call who only looks needs.
	RoleViewer Role = iota
	// RoleOperator acts on the work as well: replays and discards dead letters (one by one or
	// in bulk), cancels or runs queue items now, pauses and resumes work, trips and resets
	// breakers, runs, pauses and resumes schedules. Each of these is audited, reversible or
	// bounded by what is already configured.
	RoleOperator
	// RoleAdmin changes the configuration as well: adds and removes schedules, sets and
	// removes concurrency limits. These outlive the incident they were made for, so they
	// are kept to fewer hands.
	RoleAdmin
)

// roleNames are the roles' names, in order.
var roleNames = [...]string{RoleViewer: "viewer", RoleOperator: "operator", RoleAdmin: "admin"}

// known reports whether r is one of RoleViewer, RoleOperator and RoleAdmin.
func (r Role) known() bool { return r >= RoleViewer && r <= RoleAdmin }

// String returns the role's name: "viewer", "operator" or "admin" (a value that is none of
// the three is "Role(n)").
func (r Role) String() string {
	if r.known() {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// MarshalText returns the role's name, as the session routes answer it; a role that is not
// one of the three is an error.
func (r Role) MarshalText() ([]byte, error) {
	if !r.known() {
		return nil, fmt.Errorf("admin: %v is not a role", r)
	}
	return []byte(roleNames[r]), nil
}

// UnmarshalText sets r from a role's name, as ParseRole reads it: a configuration file can
// hold a token's role.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ParseRole returns the role named s: "viewer", "operator" or "admin". Any other name, with
// another case or surrounding white space too, is an error naming the three: a typo must not
// become the least or the greatest role.
func ParseRole(s string) (Role, error) {
	for r, name := range roleNames {
		if s == name {
			return Role(r), nil
		}
	}
	return 0, fmt.Errorf("admin: unknown role %q: want viewer, operator or admin", s)
}

// Principal is who a request comes from, as the Authorizer names them: Name is recorded as
// the actor of every change they make (replays, discards, pauses, …), Role says which routes
// they may use.
type Principal struct {
	// Name identifies the principal; it must not be empty.
	Name string
	// Role is what the principal may do. The zero value is RoleViewer.
	Role Role
}

// BearerToken is one bearer token of the default Authorizer (Config.Tokens) and the principal
// it stands for: a read-only token for a monitoring script, an operator's for a CLI.
type BearerToken struct {
	// Token is the secret a request sends as Authorization: Bearer <Token>. Use a long
	// random value (32 bytes or more) from the application's secrets; leading or trailing
	// white space is refused, since no request could send it.
	Token string
	// Name is the principal's name, recorded as the actor of what the token's requests
	// change. Required, and unique among the tokens (Config.Token's principal is "admin"),
	// so that the audit log tells the tokens apart.
	Name string
	// Role is what the token's requests may do. The zero value is RoleViewer: a token given
	// without a role can only read.
	Role Role
}

// validateTokens reports the problems of the default Authorizer's tokens: Config.Token (as
// the principal "admin") and Config.Tokens, each naming its field.
func (c Config) validateTokens() []error {
	var errs []error
	if c.Authorizer != nil {
		if len(c.Tokens) > 0 {
			// Ignoring them would leave the tokens' holders locked out without a word.
			errs = append(errs, errors.New("admin: Config.Tokens is set with Config.Authorizer, which replaces the default authorizer that reads them: drop one"))
		}
		return errs
	}
	if c.Token == "" && len(c.Tokens) == 0 {
		return append(errs, errors.New("admin: Config.Authorizer, Config.Token or Config.Tokens is required: an admin surface is never open to anyone"))
	}
	tokens := map[string]string{} // token → the field that holds it
	names := map[string]string{}  // principal name → the field that names it
	if c.Token != "" {
		if strings.TrimSpace(c.Token) == "" {
			errs = append(errs, errors.New("admin: Config.Token is only white space"))
		} else if strings.TrimSpace(c.Token) != c.Token {
			// A token read from a file often ends in a newline; accepting it would lock
			// everyone out, since no request can send it.
			errs = append(errs, errors.New("admin: Config.Token has leading or trailing white space (a newline from a secrets file?): trim it"))
		}
		tokens[c.Token], names["admin"] = "Config.Token", "Config.Token (whose principal is admin)"
	}
	for i, t := range c.Tokens {
		field := fmt.Sprintf("Config.Tokens[%d]", i)
		switch {
		case strings.TrimSpace(t.Token) == "":
			errs = append(errs, fmt.Errorf("admin: %s.Token is empty", field))
		case strings.TrimSpace(t.Token) != t.Token:
			errs = append(errs, fmt.Errorf("admin: %s.Token has leading or trailing white space (a newline from a secrets file?): trim it", field))
		case tokens[t.Token] != "":
			// The secret itself is never quoted: the error may reach a log.
			errs = append(errs, fmt.Errorf("admin: %s.Token is the token of %s: each token stands for one principal", field, tokens[t.Token]))
		default:
			tokens[t.Token] = field
		}
		switch {
		case strings.TrimSpace(t.Name) == "":
			errs = append(errs, fmt.Errorf("admin: %s.Name is empty: the principal's name is the actor the audit log records", field))
		case strings.TrimSpace(t.Name) != t.Name:
			errs = append(errs, fmt.Errorf("admin: %s.Name %q has leading or trailing white space", field, t.Name))
		case names[t.Name] != "":
			errs = append(errs, fmt.Errorf("admin: %s.Name %q is the name of %s: the audit log could not tell them apart", field, t.Name, names[t.Name]))
		default:
			names[t.Name] = field
		}
		if !t.Role.known() {
			errs = append(errs, fmt.Errorf("admin: %s.Role is %v, not a role: use RoleViewer, RoleOperator or RoleAdmin", field, t.Role))
		}
	}
	return errs
}

// tokenAuthorizer is the default Authorizer: bearer tokens, each compared in constant time (of
// its SHA-256, so that the comparison does not reveal a token's length either) and every one
// of them compared, so that the time taken does not tell which matched.
type tokenAuthorizer struct{ tokens []hashedToken }

type hashedToken struct {
	sum       [32]byte
	principal Principal
}

func (a tokenAuthorizer) Authorize(r *http.Request) (Principal, error) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if strings.TrimSpace(scheme) != "" && !strings.EqualFold(scheme, "Bearer") {
		return Principal{}, errNotBearer
	}
	if !ok || strings.TrimSpace(tok) == "" {
		return Principal{}, ErrUnauthorized
	}
	got := sha256Sum(strings.TrimSpace(tok))
	found, p := 0, Principal{}
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(got[:], t.sum[:]) == 1 {
			found, p = 1, t.principal
		}
	}
	if found == 0 {
		return Principal{}, errInvalidToken
	}
	return p, nil
}

var errInvalidToken = fmt.Errorf("%w: invalid token", ErrUnauthorized)

// errNotBearer refuses an Authorization header of another scheme than Bearer (Basic, say).
var errNotBearer = fmt.Errorf("%w: not a bearer token", ErrUnauthorized)

// newTokenAuthorizer is the default Authorizer of cfg's Token and Tokens.
func newTokenAuthorizer(cfg Config) tokenAuthorizer {
	var a tokenAuthorizer
	if cfg.Token != "" {
		a.tokens = append(a.tokens, hashedToken{sha256Sum(cfg.Token), Principal{Name: "admin", Role: RoleAdmin}})
	}
	for _, t := range cfg.Tokens {
		a.tokens = append(a.tokens, hashedToken{sha256Sum(t.Token), Principal{Name: t.Name, Role: t.Role}})
	}
	return a
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }
