package events

// MergeLog puts one session's facts, marks and applications in one log, in
// the order the pipeline would have stored them: each mark right after the
// fact that caused it (Mark.CauseIndex), each application right before the
// request it was decided for (Application.AfterIndex). facts are in
// session order; the lab, analyze and the later-use signal replay such a
// log into the projection.
func MergeLog(facts, marks, apps []Event) []Event {
	byCause := map[int][]Event{}
	for _, m := range marks {
		ci := m.Data.(*Mark).CauseIndex
		byCause[ci] = append(byCause[ci], m)
	}
	byAfter := map[int][]Event{}
	for _, a := range apps {
		ai := a.Data.(*Application).AfterIndex
		byAfter[ai] = append(byAfter[ai], a)
	}
	out := make([]Event, 0, len(facts)+len(marks)+len(apps))
	for i, f := range facts {
		out = append(out, byAfter[i]...)
		out = append(out, f)
		out = append(out, byCause[i]...)
	}
	return out
}
