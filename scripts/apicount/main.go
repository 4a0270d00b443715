// Command apicount prints the number of exported top-level identifiers (constants, variables,
// functions and types; methods and fields not counted) of each package of the module, and
// checks two naming rules: no exported name repeats its package's name (retry.Policy, not
// retry.RetryPolicy; the package's own name alone, as in time.Time, is fine), and no exported
// type name is used by two packages (one name means one thing in the whole module), except
// Config and Behavior, which mean the same in every package: its component's configuration
// and the behavior it provides. With -check it exits non-zero when a rule is broken.
//
//	go run ./scripts/apicount [-check]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// conventional names mean the same in every package that declares them: the configuration of
// the package's component, and the behavior it provides.
var conventional = map[string]bool{"Config": true, "Behavior": true}

func main() {
	check := flag.Bool("check", false, "exit 1 when a naming rule is broken")
	flag.Parse()
	type pkg struct {
		dir, name string
		count     int
	}
	var pkgs []pkg
	typeHomes := map[string][]string{} // exported type name -> packages
	var problems []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		base := d.Name()
		if path != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "benchmarks" ||
			base == "scripts" || base == "examples" || base == "internal") {
			return filepath.SkipDir
		}
		fset := token.NewFileSet()
		parsed, err := parser.ParseDir(fset, path, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			return err
		}
		for name, p := range parsed {
			if name == "main" {
				continue
			}
			n := 0
			lower := strings.ToLower(name)
			seen := func(id *ast.Ident, isType bool) {
				if !id.IsExported() {
					return
				}
				n++
				// It stutters (as golint defines it) when the package name is a strict prefix
				// followed by a new word: retry.RetryPolicy does, time.Time does not.
				if len(id.Name) > len(name) && strings.HasPrefix(strings.ToLower(id.Name), lower) &&
					strings.ToUpper(id.Name[len(name):len(name)+1]) == id.Name[len(name):len(name)+1] {
					problems = append(problems, fmt.Sprintf("%s.%s repeats its package name", name, id.Name))
				}
				if isType && !conventional[id.Name] {
					typeHomes[id.Name] = append(typeHomes[id.Name], name)
				}
			}
			for _, f := range p.Files {
				for _, decl := range f.Decls {
					switch d := decl.(type) {
					case *ast.FuncDecl:
						if d.Recv == nil {
							seen(d.Name, false)
						}
					case *ast.GenDecl:
						for _, s := range d.Specs {
							switch s := s.(type) {
							case *ast.TypeSpec:
								seen(s.Name, true)
							case *ast.ValueSpec:
								for _, id := range s.Names {
									seen(id, false)
								}
							}
						}
					}
				}
			}
			pkgs = append(pkgs, pkg{dir: path, name: name, count: n})
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	total := 0
	for _, p := range pkgs {
		fmt.Printf("%-32s %4d\n", p.dir, p.count)
		total += p.count
	}
	fmt.Printf("%-32s %4d\n", "total", total)
	names := make([]string, 0, len(typeHomes))
	for n := range typeHomes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if homes := typeHomes[n]; len(homes) > 1 {
			problems = append(problems, fmt.Sprintf("type %s is declared by %s", n, strings.Join(homes, ", ")))
		}
	}
	for _, p := range problems {
		fmt.Println("naming:", p)
	}
	if *check && len(problems) > 0 {
		os.Exit(1)
	}
}
