package testsupport

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Logs records what its loggers log, every level down to debug, for tests
// that assert on log lines: what is logged at which level, and how many
// lines. Safe for concurrent use; the zero value is ready.
type Logs struct {
	mu    sync.Mutex
	lines []LogLine
}

// LogLine is one recorded log line.
type LogLine struct {
	Level   slog.Level
	Message string
	// Attrs are the line's attributes with its logger's, by key (in a
	// group: "group.key"), their values as text.
	Attrs map[string]string
	// Func is the function that logged the line, with its package path
	// ("github.com/asynkron/protoactor-go/remote.(*endpointWriter)..."):
	// whose line it is.
	Func string
}

// String renders the line as "LEVEL message key=value ...", keys sorted.
func (l LogLine) String() string {
	var b strings.Builder
	b.WriteString(l.Level.String() + " " + l.Message)
	keys := make([]string, 0, len(l.Attrs))
	for k := range l.Attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%q", k, l.Attrs[k])
	}
	return b.String()
}

// Logger returns a logger that records into l.
func (l *Logs) Logger() *slog.Logger { return slog.New(l.Handler(nil)) }

// Handler records into l and passes what next takes on to it (nil:
// none); testkit.WithLogHandler(l.Handler) makes a node log into l.
func (l *Logs) Handler(next slog.Handler) slog.Handler {
	return &logsHandler{logs: l, next: next}
}

// Lines returns the lines recorded so far, in the order logged.
func (l *Logs) Lines() []LogLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

type logsHandler struct {
	logs   *Logs
	next   slog.Handler
	attrs  map[string]string
	prefix string // the open groups, "a.b."
}

func (h *logsHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logsHandler) Handle(ctx context.Context, r slog.Record) error {
	line := LogLine{Level: r.Level, Message: r.Message, Attrs: make(map[string]string, len(h.attrs)+r.NumAttrs())}
	if r.PC != 0 {
		f, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		line.Func = f.Function
	}
	for k, v := range h.attrs {
		line.Attrs[k] = v
	}
	r.Attrs(func(a slog.Attr) bool {
		addAttr(line.Attrs, h.prefix, a)
		return true
	})
	h.logs.mu.Lock()
	h.logs.lines = append(h.logs.lines, line)
	h.logs.mu.Unlock()
	if h.next != nil && h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *logsHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = make(map[string]string, len(h.attrs)+len(attrs))
	for k, v := range h.attrs {
		c.attrs[k] = v
	}
	for _, a := range attrs {
		addAttr(c.attrs, h.prefix, a)
	}
	if h.next != nil {
		c.next = h.next.WithAttrs(attrs)
	}
	return &c
}

func (h *logsHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	if h.next != nil {
		c.next = h.next.WithGroup(name)
	}
	return &c
}

func addAttr(to map[string]string, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			addAttr(to, p, g)
		}
		return
	}
	if a.Key == "" {
		return
	}
	to[prefix+a.Key] = v.String()
}
