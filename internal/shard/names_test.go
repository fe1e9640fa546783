package shard_test

import (
	"strings"
	"testing"

	"github.com/protoshard/protoshard/internal/shard"
	"github.com/stretchr/testify/require"
)

func TestEntityNameRoundTrip(t *testing.T) {
	ids := []struct {
		name string
		id   string
		want string // expected child name, "" = only check the properties
	}{
		{"plain", "user-42", "user-42"},
		{"unreserved kept", "a.b_c~d", "a.b_c~d"},
		{"slash", "a/b", "a%2Fb"},
		{"leading slash", "/", "%2F"},
		{"dollar like a generated name", "$1", "%241"},
		{"percent", "100%", "100%25"},
		{"already escaped looking", "%2F", "%252F"},
		{"escaped dollar looking", "%24", "%2524"},
		{"space", "a b", "a%20b"},
		{"plus", "a+b", "a+b"},
		{"question and hash", "a?b#c", "a%3Fb%23c"},
		{"unicode", "ĸøſ-日本", ""},
		{"emoji", "🙂", "%F0%9F%99%82"},
		{"control chars", "a\x00b\nc\t", "a%00b%0Ac%09"},
		{"invalid utf-8", "\xff\xfe", "%FF%FE"},
		{"dots", "..", ".."},
		{"single dot", ".", "."},
		{"colon at", "user:1@host", "user:1@host"},
		{"semicolon comma", "a;b,c", "a%3Bb%2Cc"},
		{"backslash quote", `a\"b'`, "a%5C%22b%27"},
		{"long", strings.Repeat("x/", 200), ""},
	}
	seen := map[string]string{}
	for _, tc := range ids {
		t.Run(tc.name, func(t *testing.T) {
			name := shard.EntityName(tc.id)
			if tc.want != "" {
				require.Equal(t, tc.want, name)
			}
			require.NotEmpty(t, name)
			require.NotContains(t, name, "/", "a child name must not contain the PID separator")
			require.NotContains(t, name, "$", "a child name must not look like a generated one")
			require.NotContains(t, name, " ")
			for _, r := range name {
				require.Less(t, r, rune(0x7f), "child names are printable ASCII")
				require.Greater(t, r, rune(0x20), "child names are printable ASCII")
			}
			back, err := shard.EntityID(name)
			require.NoError(t, err)
			require.Equal(t, tc.id, back)
		})
		name := shard.EntityName(tc.id)
		if other, dup := seen[name]; dup {
			t.Fatalf("IDs %q and %q share the name %q", other, tc.id, name)
		}
		seen[name] = tc.id
	}
}

func TestEntityIDRejectsNonCanonicalNames(t *testing.T) {
	for _, name := range []string{
		"",      // empty
		"a/b",   // raw separator
		"$1",    // raw dollar
		"%41",   // escaped unreserved char: the name of "A" is "A"
		"a%2fb", // lower-case hex: the name of "a/b" is "a%2Fb"
		"%",     // bad escape
		"%zz",   // bad escape
		"a b",   // raw space
		"日本",    // raw non-ASCII
	} {
		_, err := shard.EntityID(name)
		require.Error(t, err, "name %q", name)
	}
}
