package analyze

import (
	"context"
	"time"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/eval/compare"
	"github.com/prunesched/prunesched/internal/eval/lab"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/scheduler"
)

// CompareOptions are what `analyze --compare` adds to a Config.
type CompareOptions struct {
	// MaskWindow is the observations masking-N keeps (0: the lab's default).
	MaskWindow int
	// Recommend runs the policy candidates (compare.Candidates) instead of
	// the lab rows and picks the cheapest, cost with recoveries, whose
	// later-used count is at most Risk and whose recoveries per 100 model
	// requests are at most RecoveryBudget when it is set.
	Recommend      bool
	Risk           int
	RecoveryBudget *float64
	// PolicyName, when Config.Policy is not the default, names the extra
	// row that runs the user's own policy (e.g. its file).
	PolicyName string
}

// CompareResult is `analyze --compare`'s answer: the comparison (its
// fields at the top level of the JSON: note, rows, sessions, none,
// comparison) or, with Recommend, the recommendation; and the files that
// failed.
type CompareResult struct {
	*compare.Report
	Recommendation *compare.Recommendation `json:"recommendation,omitempty"`
	Files          int                     `json:"files"`
	Failed         []FileError             `json:"failed"`
}

// RunCompare imports every file of cfg (as Run does: a bad file is reported
// and the others go on, unless Strict) and runs every label-free lab row
// over the sessions through the production scheduler and projection, under
// immediate and scheduled timing (package compare). Nothing is stored: the
// rows are simulated over the imported facts. The later-used count it
// reports is a proxy for a false prune, not ground truth.
func RunCompare(ctx context.Context, cfg Config, opt CompareOptions) (*CompareResult, error) {
	progress, now := cfg.progressf(), cfg.clock()
	all, failed, err := importFiles(ctx, cfg, now, progress)
	if err != nil {
		return nil, err
	}
	res := &CompareResult{Files: len(cfg.Files), Failed: append([]FileError{}, failed...)}
	sessions := make([]importers.Session, 0, len(all))
	for _, im := range all {
		sessions = append(sessions, im.s)
	}
	blobs := store.NewMemBlobs()
	tc := tokens.New()
	in, err := compare.Prepare(ctx, sessions, blobs, tc)
	if err != nil {
		return nil, err
	}
	start := now()
	step := func(what string) func(done, total int) {
		return func(done, total int) {
			progress("%s: %d/%d session(s) (%s)", what, done, total, now().Sub(start).Round(time.Second))
		}
	}
	if opt.Recommend {
		res.Recommendation, err = compare.Recommend(ctx, in, blobs, tc, compare.Limits{Risk: opt.Risk, RecoveryBudget: opt.RecoveryBudget}, step("recommend"))
		return res, err
	}
	rows, err := compare.Rows(opt.MaskWindow)
	if err != nil {
		return res, err
	}
	if opt.PolicyName != "" {
		rows = append(rows, lab.PolicyRow(opt.PolicyName, "candidate", "the policy given with --policy", scheduler.StrategyScheduled, cfg.Policy))
	}
	res.Report, err = compare.Run(ctx, rows, in, blobs, tc, step("compare"))
	return res, err
}
