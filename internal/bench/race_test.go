package bench

import "github.com/prunesched/prunesched/internal/testutil"

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = testutil.Race
