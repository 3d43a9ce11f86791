// Command couponlink keeps coupon inventory honest: a thin write API, a
// binlog CDC daemon that derives counters and Redis stock from the ledgers,
// and a reconciler that proves them right. Run `couponlink help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/couponlink/couponlink/internal/redact"
	"github.com/couponlink/couponlink/internal/redisconn"
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"migrate", "create the database when missing and apply the schema migrations", runMigrate},
		{"api", "serve the HTTP write API (claims, redemptions, refunds, voids, expiry)", runAPI},
		{"expire", "run one expiry sweep now (AVAILABLE past expires_at -> EXPIRED)", runExpire},
		{"cdc", "tail the binlog into counters, Redis stock keys, anomalies and metrics", runCDC},
		{"reconcile", "prove counters and Redis equal the truth; fix what is safe; record every pass", runReconcile},
		{"anomalies", "list the findings (anomalies, reconcile differences) and acknowledge, close or reopen one (anomalies list|ack|close|reopen)", runAnomalies},
		{"audit", "report what was already wrong in a shop's tables before couponlink came (exit 1 when anything was found)", runAudit},
		{"status", "print where the cdc stands: checkpoint, lag, anomalies, inventory; -template: its channels", runStatus},
		{"quota", "show, set, reset and audit a template's quota rebalancing policy (quota policy ...)", runQuota},
		{"mapping", "check a legacy mapping against the live schema: roles, types, NULLs, indexes, checks on and off (mapping check)", runMapping},
		{"token", "make a new API token with a name and a role, and its line for the token file (token new)", runToken},
		{"version", "print the build: module version, VCS revision and time, Go version", runVersion},
	}
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr)
}

// runContext runs the command named by args[0] until it ends or ctx does,
// and returns the process's exit code.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// go-redis's notes, redacted, until a command's -log-level logger takes them
	redisconn.SetLogger(slog.New(redact.Handler(slog.NewTextHandler(stderr, nil))))
	if len(args) == 0 || isHelp(args[0]) {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			}
			var ec exitCode
			if errors.As(err, &ec) {
				return int(ec)
			}
			fmt.Fprintf(stderr, "couponlink %s: %s\n", c.name, redact.Text(err.Error()))
			return 1
		}
	}
	fmt.Fprintf(stderr, "couponlink: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// isHelp says whether arg asks for the usage of a command of commands.
func isHelp(arg string) bool { return arg == "help" || arg == "-h" || arg == "--help" }

// exitCode ends the command with that code, its report already printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

func usage(w io.Writer) {
	printUsage(w, "couponlink <command> [flags]", "couponlink <command>", 10, commands())
}

// printUsage prints the usage of a command line that picks one of cmds:
// its synopsis, how a command lists its flags (flagsOf -h), and a line a
// command, its name in a column width wide, then its summary.
func printUsage[C interface{ usageLine() (name, summary string) }](w io.Writer, synopsis, flagsOf string, width int, cmds []C) {
	fmt.Fprintf(w, "usage: %s    (%s -h lists its flags)\n", synopsis, flagsOf)
	fmt.Fprintln(w)
	for _, c := range cmds {
		name, summary := c.usageLine()
		fmt.Fprintf(w, "  %-*s %s\n", width, name, summary)
	}
}

func (c command) usageLine() (name, summary string) { return c.name, c.summary }
