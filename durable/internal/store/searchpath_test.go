package store

import (
	"slices"
	"testing"
)

func TestFirstSchemaOfASearchPath(t *testing.T) {
	for _, c := range []struct {
		path, user string
		split      []string
		first      string
	}{
		{`"$user", public`, "", []string{"$user", "public"}, "public"},
		{`"$user", public`, "alice", []string{"$user", "public"}, "alice"},
		{`no_such,public`, "", []string{"no_such", "public"}, "no_such"},
		{`Jobs, public`, "", []string{"jobs", "public"}, "jobs"},
		{`"Jobs", public`, "", []string{"Jobs", "public"}, "Jobs"},
		{`"a,b", "say ""hi"""`, "", []string{"a,b", `say "hi"`}, "a,b"},
		{``, "", nil, ""},
	} {
		if got := splitSearchPath(c.path); !slices.Equal(got, c.split) {
			t.Errorf("splitSearchPath(%q) = %q, want %q", c.path, got, c.split)
		}
		first, ok := firstSchema(c.path, c.user)
		if first != c.first || ok != (c.first != "") {
			t.Errorf("firstSchema(%q, %q) = %q, %v; want %q", c.path, c.user, first, ok, c.first)
		}
	}
}
