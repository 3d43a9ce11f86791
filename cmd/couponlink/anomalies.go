package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/inventory"
)

// findingsSettings are the flags of couponlink anomalies list, ack and
// close: the database, and which finding and who acts and why (ack,
// close) or which findings (list).
type findingsSettings struct {
	db               settings.Database
	fingerprint      *string
	operator, reason *string
	state, source    *string
	limit            *int
	asJSON           *bool
}

// findingsCommand is one of couponlink anomalies' commands: its summary
// for the usage, and about for its -h.
type findingsCommand struct {
	name, summary, about string
	act                  bool // ack or close: -fingerprint, -operator and -reason
}

func findingsCommands() []findingsCommand {
	return []findingsCommand{
		{"list", "list the findings (the cdc's anomalies, the reconciler's differences left for a person) and where each stands",
			"Lists the findings (the cdc's anomalies, the reconciler's differences left for a person), the last seen first, and where each stands.", false},
		{"ack", "acknowledge an open finding (who, why)",
			"Acknowledges an open finding, with who and why (kept with the time): found again as it is, it is reported acknowledged, fails no reconcile -once and fires no alert; found changed, it is open again.", true},
		{"close", "close an open or acknowledged finding (who, why)",
			"Closes an open or acknowledged finding, with who and why (kept with the time): found again, it is open again.", true},
		{"reopen", "open an acknowledged or closed finding again (who, why)",
			"Opens an acknowledged or closed finding again, with who and why (kept with the time; the acknowledgement and closing are kept too): its alert counts it again.", true},
	}
}

func findingsFlags(c findingsCommand, stderr io.Writer) (*settings.Flags, *findingsSettings) {
	f := newFlags("anomalies "+c.name, c.about+" "+
		"A finding's fingerprint names its kind and the rows it names; its state is open, acknowledged or closed. "+
		"With a mapping with sources, each source's server has its own findings: -dsn is that server's.", stderr)
	o := &findingsSettings{}
	f.Add(&o.db)
	if c.act {
		o.fingerprint = f.String("fingerprint", "", "the finding's fingerprint (as list shows it; required)")
		o.operator = f.String("operator", "", "who acts (required)")
		o.reason = f.String("reason", "", "what was checked, and why (required)")
		return f, o
	}
	o.state = f.String("state", "", "only the findings in this state: open, acknowledged or closed (default: every state)")
	o.source = f.String("source", "", "only the findings of cdc (anomalies) or reconcile (differences left for a person) (default: both)")
	o.limit = f.Int("limit", 100, "most findings to list, the last seen first (at most 1000)")
	o.asJSON = f.Bool("json", false, "print as JSON (what GET /v1/findings answers)")
	return f, o
}

// runAnomalies is `couponlink anomalies <list|ack|close|reopen> [flags]`.
func runAnomalies(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		anomaliesUsage(stdout)
		return nil
	}
	for _, c := range findingsCommands() {
		if len(args) > 0 && c.name == args[0] {
			f, o := findingsFlags(c, stderr)
			if err := f.Parse(args[1:]); err != nil {
				return err
			}
			return withMySQL(*o.db.DSN, 2, func(db *sql.DB) error {
				if !c.act {
					return o.list(ctx, db, stdout)
				}
				return o.move(ctx, db, c.name, stdout, stderr)
			})
		}
	}
	anomaliesUsage(stderr)
	return errUsage
}

func anomaliesUsage(w io.Writer) {
	printUsage(w, "couponlink anomalies <command> [flags]", "couponlink anomalies <command>", 6, findingsCommands())
}

func (c findingsCommand) usageLine() (name, summary string) { return c.name, c.summary }

func (o *findingsSettings) list(ctx context.Context, db *sql.DB, stdout io.Writer) error {
	switch *o.state {
	case "", api.FindingOpen, api.FindingAcknowledged, api.FindingClosed:
	default:
		return fmt.Errorf("-state %q: open, acknowledged or closed", *o.state)
	}
	fs, err := inventory.ListFindings(ctx, db, inventory.FindingsQuery{Source: *o.source, State: *o.state, Limit: *o.limit})
	if err != nil {
		return err
	}
	if *o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(api.Findings{Findings: fs})
	}
	if len(fs) == 0 {
		fmt.Fprintln(stdout, "no findings")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "fingerprint\tsource\tkind\tstate\tseen\tlast seen\tsubject\tby\twhy")
	for _, f := range fs {
		by, why := f.AcknowledgedBy, f.AcknowledgedReason
		if f.State == api.FindingClosed {
			by, why = f.ClosedBy, f.ClosedReason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", f.Fingerprint, f.Source, f.Kind, f.State, f.TimesSeen,
			f.LastSeen.UTC().Format(time.RFC3339), f.Subject, by, why)
	}
	return tw.Flush()
}

// move acknowledges (ack), closes (close) or reopens (reopen) the finding
// of -fingerprint;
// a missing flag, an unknown finding or one in another state is exit 1.
func (o *findingsSettings) move(ctx context.Context, db *sql.DB, name string, stdout, stderr io.Writer) error {
	if *o.fingerprint == "" {
		fmt.Fprintf(stderr, "couponlink anomalies %s: -fingerprint is required (couponlink anomalies list shows them)\n", name)
		return errUsage
	}
	act := map[string]func(context.Context, *sql.DB, string, string, string, string) (inventory.Finding, error){
		"ack": inventory.AckFinding, "close": inventory.CloseFinding, "reopen": inventory.ReopenFinding}[name]
	f, err := act(ctx, db, *o.fingerprint, *o.operator, *o.reason, "") // no token: the operator as given
	if err != nil {
		return reportFinding(stderr, "anomalies "+name, err)
	}
	fmt.Fprintf(stdout, "finding %s (%s %s: %s) %s by %s\n", f.Fingerprint, f.Source, f.Kind, f.Subject, f.State, *o.operator)
	return nil
}

// reportFinding prints why a finding could not be acknowledged or closed
// (no such finding, another state, no operator or reason) and ends the
// command with exit code 1; other errors go back to main.
func reportFinding(stderr io.Writer, name string, err error) error {
	var input *inventory.FindingInputError
	if !errors.Is(err, inventory.ErrNoFinding) && !errors.Is(err, inventory.ErrFindingState) && !errors.As(err, &input) {
		return err
	}
	fmt.Fprintf(stderr, "couponlink %s: %v\n", name, err)
	return exitCode(1)
}
