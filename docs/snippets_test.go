package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var source = regexp.MustCompile(`<!--\s*snippet of (\S+)\s*-->`)

// normalize drops a line's trailing comment and collapses its blanks, so a snippet may be
// annotated and aligned for reading.
func normalize(line string) string {
	if i := strings.Index(line, "//"); i >= 0 && !strings.Contains(line[:i], `"`) {
		line = line[:i]
	}
	return strings.Join(strings.Fields(line), " ")
}

func TestSnippetsAreCopiedFromCompiledCode(t *testing.T) {
	guides, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	guides = append(guides, "../README.md")
	checked := 0
	for _, guide := range guides {
		text, err := os.ReadFile(guide)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "```go" {
				continue
			}
			var from string
			for j := i - 1; j >= 0 && j >= i-3; j-- {
				if m := source.FindStringSubmatch(lines[j]); m != nil {
					from = m[1]
					break
				}
			}
			var snippet []string
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				snippet = append(snippet, lines[i])
			}
			if from == "" {
				t.Errorf("%s: the Go snippet above line %d names no source (<!-- snippet of path/to/file_test.go -->)", guide, i+1)
				continue
			}
			code, err := os.ReadFile(filepath.Join("..", from))
			if err != nil {
				t.Errorf("%s: snippet source: %v", guide, err)
				continue
			}
			var have []string
			for _, l := range strings.Split(string(code), "\n") {
				have = append(have, normalize(l))
			}
			at := 0
			for _, l := range snippet {
				want := normalize(l)
				if want == "" || want == "..." {
					continue
				}
				for at < len(have) && have[at] != want {
					at++
				}
				if at == len(have) {
					t.Errorf("%s: snippet line %q is not in %s (after the lines before it)", guide, strings.TrimSpace(l), from)
					break
				}
				at++
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no snippet found")
	}
}
