package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// cli runs the command line in process.
func cli(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsage(t *testing.T) {
	code, out, errOut := cli("-h")
	if code != exitOK || errOut != "" {
		t.Fatalf("-h: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"members", "shards", "remove-data", "-consul", "-service", "-cluster", "-type", "-json", "-force", "-dry-run", "-timeout"} {
		if !strings.Contains(out, want) {
			t.Errorf("-h does not mention %s:\n%s", want, out)
		}
	}
	code, sub, _ := cli("remove-data", "-h")
	if code != exitOK || !strings.Contains(sub, "-dry-run") || strings.Contains(sub, "protoshard members") {
		t.Fatalf("remove-data -h: exit %d\n%s", code, sub)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"shards"}, "-type is required"},
		{[]string{"remove-data", "-force"}, "-type is required"},
		{[]string{"members", "extra"}, `unexpected argument "extra"`},
		{[]string{"members", "-nope"}, "flag provided but not defined: -nope"},
		{[]string{"shards", "-type"}, "flag needs an argument: -type"},
		{[]string{"members", "-timeout", "soon"}, "invalid value"},
		{[]string{"members", "-consul", "ftp://x:1"}, "ftp://x:1"},
		{[]string{"shards", "-type", "T", "-service", ""}, "-service must not be empty"},
	} {
		code, out, errOut := cli(tc.args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", tc.args, code, exitUsage, errOut)
		}
		if out != "" || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: stdout %q, stderr %q, want one line with %q", tc.args, out, errOut, tc.want)
		}
	}
}

// A Consul that cannot be reached is a failure (exit 1) named by its
// address on one line, for every command.
func TestUnreachableConsul(t *testing.T) {
	// A port that was free a moment ago: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	for _, args := range [][]string{
		{"members", "-consul", addr},
		{"shards", "-type", "T", "-consul", addr},
		{"remove-data", "-type", "T", "-consul", addr},
		{"remove-data", "-type", "T", "-consul", addr, "-force", "-dry-run"},
	} {
		code, out, errOut := cli(args...)
		if code != exitFailure {
			t.Errorf("%q: exit %d, want %d", args, code, exitFailure)
		}
		want := "protoshard " + args[0] + ": cannot reach Consul at " + addr + ": "
		if out != "" || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: stdout %q, stderr %q, want one line beginning %q", args, out, errOut, want)
		}
	}
}
