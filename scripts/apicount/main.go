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
// the package's component, the behavior it provides, and the interface its behavior delivers
// its events to (an observer attached once with mediator.Observe).
var conventional = map[string]bool{"Config": true, "Behavior": true, "Observer": true}

// homonyms are the functions allowed to share the name of another package's type, because they
// mean that type: each makes or returns one.
var homonyms = map[string]bool{
	"handlers.Command":   true, // makes the handler of a mediator.Command from a function
	"tracing.Propagator": true, // returns the durable.Propagator that carries the trace context
}

// A reservation keeps an exported field or method name to one meaning, told by its type.
type reservation struct {
	ok   func(typ string) bool
	want string // what the type must be, for the message
}

// reserved are the field and method names with one meaning in the module. Types are written
// as the package that declares them spells them from outside (behaviors.KeyFunc, string).
var reserved = map[string]reservation{
	"Key": {
		ok:   func(t string) bool { return t == "behaviors.KeyFunc" || t == "string" },
		want: "a behaviors.KeyFunc or a string key (a typed context key is a mediator.ContextKey)",
	},
	"Outcome": {
		ok: func(t string) bool {
			_, name, _ := strings.Cut(t, ".")
			return strings.HasSuffix(name, "Outcome")
		},
		want: "a type named …Outcome whose doc lists its values, not a bare string",
	},
}

// pkgCount is one package's count of exported top-level identifiers.
type pkgCount struct {
	dir, name string
	count     int
}

func main() {
	check := flag.Bool("check", false, "exit 1 when a naming rule is broken")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	pkgs, problems, err := analyze(root)
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
	for _, p := range problems {
		fmt.Println("naming:", p)
	}
	if *check && len(problems) > 0 {
		os.Exit(1)
	}
}

// analyze reads every non-test package under root (skipping internal, testdata, examples,
// scripts and benchmarks, which export nothing to users) and returns their counts and every
// broken naming rule.
func analyze(root string) ([]pkgCount, []string, error) {
	var pkgs []pkgCount
	typeHomes := map[string][]string{}  // exported type name -> packages
	valueHomes := map[string][]string{} // exported function, constant or variable name -> packages
	var problems []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		base := d.Name()
		if path != root && (strings.HasPrefix(base, ".") || base == "testdata" || base == "benchmarks" ||
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
				switch {
				case isType && !conventional[id.Name]:
					typeHomes[id.Name] = append(typeHomes[id.Name], name)
				case !isType && !slices.Contains(valueHomes[id.Name], name):
					valueHomes[id.Name] = append(valueHomes[id.Name], name)
				}
			}
			// member checks an exported field or method name against its reservation.
			member := func(owner, what string, id *ast.Ident, typ ast.Expr) {
				r, ok := reserved[id.Name]
				if !ok || !id.IsExported() || typ == nil {
					return
				}
				if t := typeString(name, typ); !r.ok(t) {
					problems = append(problems, fmt.Sprintf("%s %s.%s.%s is a %s; a %s named %s must be %s",
						what, name, owner, id.Name, t, what, id.Name, r.want))
				}
			}
			for _, f := range p.Files {
				for _, decl := range f.Decls {
					switch d := decl.(type) {
					case *ast.FuncDecl:
						if d.Recv == nil {
							seen(d.Name, false)
						} else if owner := receiver(d.Recv); ast.IsExported(owner) {
							if res := d.Type.Results; res != nil && len(res.List) == 1 && len(res.List[0].Names) <= 1 {
								member(owner, "method", d.Name, res.List[0].Type)
							}
						}
					case *ast.GenDecl:
						for _, s := range d.Specs {
							switch s := s.(type) {
							case *ast.TypeSpec:
								if sel, ok := s.Type.(*ast.SelectorExpr); ok && s.Assign.IsValid() && sel.Sel.Name == s.Name.Name {
									continue // a re-export (type Driver = driver.Driver) is the other package's type, not a second one
								}
								seen(s.Name, true)
								if st, ok := s.Type.(*ast.StructType); ok && s.Name.IsExported() {
									for _, fl := range st.Fields.List {
										for _, fid := range fl.Names {
											member(s.Name.Name, "field", fid, fl.Type)
										}
									}
								}
							case *ast.ValueSpec:
								for _, id := range s.Names {
									seen(id, false)
								}
							}
						}
					}
				}
			}
			pkgs = append(pkgs, pkgCount{dir: path, name: name, count: n})
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(typeHomes))
	for n := range typeHomes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if homes := typeHomes[n]; len(homes) > 1 {
			problems = append(problems, fmt.Sprintf("type %s is declared by %s", n, strings.Join(homes, ", ")))
		}
		others := slices.DeleteFunc(slices.Clone(valueHomes[n]), func(p string) bool { return homonyms[p+"."+n] })
		if len(others) > 0 {
			problems = append(problems, fmt.Sprintf("%s is a type in %s and a function or value in %s",
				n, strings.Join(typeHomes[n], ", "), strings.Join(others, ", ")))
		}
	}
	return pkgs, problems, nil
}

// receiver returns the name of a method's receiver type.
func receiver(fl *ast.FieldList) string {
	t := fl.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// typeString spells typ as seen from outside package pkg: a type pkg declares gets its package
// name (KeyFunc in behaviors is behaviors.KeyFunc), a pointer and type arguments are dropped
// (*mediator.ContextKey[T] is mediator.ContextKey), and a predeclared type stays as it is.
func typeString(pkg string, typ ast.Expr) string {
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		case *ast.Ident:
			if predeclared[x.Name] {
				return x.Name
			}
			return pkg + "." + x.Name
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok {
				return id.Name + "." + x.Sel.Name
			}
		}
		return fmt.Sprintf("%T", typ)[len("*ast."):]
	}
}

// predeclared are the predeclared types a field may have.
var predeclared = map[string]bool{
	"any": true, "bool": true, "byte": true, "complex64": true, "complex128": true, "error": true,
	"float32": true, "float64": true, "int": true, "int8": true, "int16": true, "int32": true,
	"int64": true, "rune": true, "string": true, "uint": true, "uint8": true, "uint16": true,
	"uint32": true, "uint64": true, "uintptr": true,
}
