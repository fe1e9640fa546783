// Command protoshard is the operator's tool for a protoshard cluster that
// keeps its membership and its sharding data in Consul. It is Akka's
// RemoveInternalClusterShardingData together with a read-only view:
//
//	protoshard members     [-consul ADDR] [-service NAME] [-json]
//	protoshard shards      -type T [-consul ADDR] [-service NAME] [-cluster NAME] [-json]
//	protoshard remove-data -type T [-consul ADDR] [-service NAME] [-cluster NAME] [-dry-run] [-force]
//
// members lists the members registered in Consul as -service, oldest
// first, with their status. shards shows the coordinator state of an
// entity type (its regions and proxies, where every shard lives, the
// shards waiting to be started again) and the entities it remembers.
// remove-data deletes a type's stored coordinator state and remembered
// entities, for instance after the type's sharding settings changed
// incompatibly or after a crash left stale data; it refuses while regions
// of the type run on live members of any service (see removeDataFlags).
//
// The data of a type lives under its cluster's name,
// protoshard/<cluster>/sharding/<type>/ (see package
// actorsharding/consulstore): -cluster, which is the -service value unless
// given, as membership.Cluster.Name is the service name with
// membership/consul.
//
// Every command reads Consul with consistent reads, at the address of
// -consul or else CONSUL_HTTP_ADDR (and CONSUL_HTTP_TOKEN and the other
// CONSUL_HTTP_* variables, as every Consul client). Exit codes: 0 success,
// 1 failure (Consul unreachable, a refusal, a lost race), 2 usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	consulmembership "github.com/protoshard/protoshard/membership/consul"
)

// Exit codes of run.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the flags every command has.
type options struct {
	consul  string
	target  target
	timeout time.Duration
}

// target is the cluster a command is about.
type target struct {
	// service is the Consul service its members register as.
	service string
	// cluster is the cluster's name, under which its keys live
	// (protoshard/<cluster>/...): the service name unless -cluster says
	// otherwise, as membership.Cluster.Name is with membership/consul.
	cluster string
}

// entityType names typeName of the target's cluster, for messages.
func (t target) entityType(typeName string) string {
	return fmt.Sprintf("entity type %q of cluster %q", typeName, t.cluster)
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.consul, "consul", "", "Consul HTTP address (host:port or URL); default $CONSUL_HTTP_ADDR, else 127.0.0.1:8500")
	fs.StringVar(&o.target.service, "service", consulmembership.DefaultServiceName, "Consul service name the members register as")
	fs.StringVar(&o.target.cluster, "cluster", "", "cluster name whose keys to read, protoshard/<cluster>/...; default the -service value")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "time limit for all of the command's Consul requests")
}

// command is one subcommand: its flags and what it does once they parsed.
type command struct {
	name     string
	synopsis string
	// flags defines the command's own flags on fs and returns what it does
	// with them once they are parsed.
	flags func(fs *flag.FlagSet) action
}

var commands = []command{
	{
		name:     "members",
		synopsis: "list the members registered in Consul, oldest first",
		flags:    membersFlags,
	},
	{
		name:     "shards",
		synopsis: "show where the shards of an entity type live and what it remembers",
		flags:    shardsFlags,
	},
	{
		name: "remove-data",
		synopsis: "delete an entity type's coordinator state and remembered entities\n" +
			"(refused while its regions run on live members, unless -force)",
		flags: removeDataFlags,
	},
}

// run runs the command line args (without the program name) and returns
// the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "protoshard: no command given; run 'protoshard -h' for usage")
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == name {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "protoshard: unknown command %q; run 'protoshard -h' for usage\n", name)
		return exitUsage
	}

	fs, opts, action := cmd.flagSet()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args[1:])
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if errors.Is(err, flag.ErrHelp) {
		cmd.usage(stdout)
		return exitOK
	}
	if err == nil {
		err = action.validate()
	}
	if err == nil && opts.target.service == "" {
		err = errors.New("-service must not be empty")
	}
	if opts.target.cluster == "" {
		opts.target.cluster = opts.target.service
	}
	if err != nil {
		fmt.Fprintf(stderr, "protoshard %s: %v; run 'protoshard %s -h' for usage\n", name, err, name)
		return exitUsage
	}

	source, err := newConsulSource(opts.consul)
	if err != nil {
		fmt.Fprintf(stderr, "protoshard %s: %v\n", name, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	if err := action.run(ctx, source, opts.target, stdout); err != nil {
		fmt.Fprintf(stderr, "protoshard %s: %s\n", name, oneLine(err.Error()))
		return exitFailure
	}
	return exitOK
}

// action is a parsed command, ready to run.
type action struct {
	// validate checks what the flag package cannot (required flags).
	validate func() error
	run      func(ctx context.Context, source *consulSource, t target, out io.Writer) error
}

func (c *command) flagSet() (*flag.FlagSet, *options, action) {
	fs := flag.NewFlagSet("protoshard "+c.name, flag.ContinueOnError)
	opts := &options{}
	opts.register(fs)
	return fs, opts, c.flags(fs)
}

// usage prints the command's synopsis and flags.
func (c *command) usage(w io.Writer) {
	fs, _, _ := c.flagSet()
	fmt.Fprintf(w, "\nprotoshard %s: %s\n", c.name, strings.ReplaceAll(c.synopsis, "\n", "\n  "))
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// usage prints every command with its flags.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: protoshard <command> [flags]")
	fmt.Fprintln(w, "\nExit codes: 0 success, 1 failure (Consul unreachable, refusal), 2 usage error.")
	for i := range commands {
		commands[i].usage(w)
	}
}

// oneLine keeps an error message on one line: Consul's answers may hold
// line breaks.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// newConsulSource returns the Consul client of addr ("" for the
// environment's CONSUL_HTTP_ADDR, else the agent's default address).
func newConsulSource(addr string) (*consulSource, error) {
	cfg := api.DefaultConfig()
	if addr != "" {
		cfg.Address = addr
	}
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("consul client for %s: %w", cfg.Address, err)
	}
	return &consulSource{client: client, addr: cfg.Address}, nil
}
