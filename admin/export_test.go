package admin

// RouteRoles returns the role each route of the handler of cfg needs, by pattern: the tests
// walk it, so that a route registered without a line in their table fails them.
func RouteRoles(cfg Config) (map[string]Role, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Role, len(s.needs))
	for p, n := range s.needs {
		out[p] = n.role
	}
	return out, nil
}
