// Package apicheck holds the test that keeps the library's public API
// deliberate: every exported name is listed in api.txt, so a change that
// adds or removes one shows in review as a change of that file.
package apicheck

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
	"testing"
)

var update = flag.Bool("update", false, "rewrite api.txt from the source")

// moduleRoot is the repository's root, two folders up from this package.
const moduleRoot = "../.."

// exported lists the library's exported names, one per line as
// "package name": top-level names and the exported methods of exported
// types, without tests, generated code, internal packages, commands and
// examples.
func exported(root string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch n := d.Name(); {
			case path != root && (strings.HasPrefix(n, ".") || n == "internal" || n == "cmd" || n == "examples" || n == "testdata"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, ".pb.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		if f.Name.Name == "main" {
			return nil
		}
		pkg, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg = filepath.ToSlash(pkg)
		for _, decl := range f.Decls {
			names = append(names, declNames(pkg, decl)...)
		}
		return nil
	})
	slices.Sort(names)
	return slices.Compact(names), err
}

// declNames are the exported names decl declares in pkg.
func declNames(pkg string, decl ast.Decl) []string {
	var names []string
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv == nil {
			return []string{pkg + " " + d.Name.Name}
		}
		if recv := receiverName(d.Recv.List[0].Type); ast.IsExported(recv) {
			return []string{pkg + " " + recv + "." + d.Name.Name}
		}
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names = append(names, pkg+" "+s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, pkg+" "+n.Name)
					}
				}
			}
		}
	}
	return names
}

// receiverName is the type name of a method's receiver: T, *T, T[P] or *T[P].
func receiverName(t ast.Expr) string {
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

func TestPublicAPIIsListed(t *testing.T) {
	names, err := exported(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(names, "\n") + "\n"
	if *update {
		if err := os.WriteFile("api.txt", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("api.txt")
	if err != nil {
		t.Fatalf("%v (go test ./internal/apicheck -update writes it)", err)
	}
	listed := strings.Split(strings.TrimSpace(string(want)), "\n")
	var added, removed []string
	for _, n := range names {
		if _, found := slices.BinarySearch(listed, n); !found {
			added = append(added, n)
		}
	}
	for _, n := range listed {
		if _, found := slices.BinarySearch(names, n); !found {
			removed = append(removed, n)
		}
	}
	if len(added) > 0 || len(removed) > 0 {
		t.Errorf("the public API differs from api.txt (%d names now, %d listed); if that is meant, run go test ./internal/apicheck -update and review the change\nnew: %v\ngone: %v",
			len(names), len(listed), added, removed)
	}
}

func TestExported(t *testing.T) {
	dir := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/a.go", `package a
type T struct{}
type u struct{}
type G[P any] struct{}
func (T) M() {}
func (*T) N() {}
func (u) M() {}
func (G[P]) M() {}
func F() {}
func f() {}
var V, w = 1, 2
const C = 1
`)
	write("a/a_test.go", "package a\nfunc TestX() {}\n")
	write("a/a.pb.go", "package a\ntype Generated struct{}\n")
	write("internal/b/b.go", "package b\nfunc B() {}\n")
	write("cmd/c/main.go", "package main\nfunc Main() {}\n")
	write("examples/e/e.go", "package e\nfunc E() {}\n")
	write("m/main.go", "package main\nfunc M() {}\n")
	got, err := exported(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a C", "a F", "a G", "a G.M", "a T", "a T.M", "a T.N", "a V"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
