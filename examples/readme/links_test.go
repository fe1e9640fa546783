package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink matches a Markdown link or image: [text](target) or ![alt](target).
var mdLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// prose returns the lines of page outside fenced code blocks, with their
// 1-based numbers.
func prose(page string) map[int]string {
	out := map[int]string{}
	fenced := false
	for i, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out[i+1] = l
		}
	}
	return out
}

// anchor is GitHub's anchor of a heading: lower case, spaces to hyphens,
// everything but letters, digits, hyphens and underscores dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of the headings of the Markdown file at path.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range prose(string(data)) {
		if strings.HasPrefix(l, "#") {
			out[anchor(strings.TrimSpace(strings.TrimLeft(l, "#")))] = true
		}
	}
	return out
}

// TestRelativeLinksResolve: every relative link of the README and of the
// docs pages names a file of the repository, and a heading of it when the
// link has an anchor into a Markdown file.
func TestRelativeLinksResolve(t *testing.T) {
	checked := 0
	for _, doc := range documents(t) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(doc, "../../")
		for n, l := range prose(string(data)) {
			for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				path := doc
				if file != "" {
					path = filepath.Join(filepath.Dir(doc), file)
				}
				checked++
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s line %d: link %q: no such file", name, n, target)
					continue
				}
				if frag != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[frag] {
					t.Errorf("%s line %d: link %q: no heading with the anchor #%s", name, n, target, frag)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link to check")
	}
}
