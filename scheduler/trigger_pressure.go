package scheduler

// rulePressure (trigger pressure): the bundle about to be sent (before this
// decision) exceeds the pressure threshold: scheduler.pressure_tokens when
// set, else scheduler.pressure_percent of the model's context window (from
// the price table). Everything pending applies.
func rulePressure(c *Core, m moment) bool {
	return m.curTotal > pressureThreshold(c, m.cs.pr)
}

func pressureThreshold(c *Core, pr pricing) int {
	s := c.pol.Scheduler
	if s.PressureTokens > 0 {
		return s.PressureTokens
	}
	return int(float64(pr.price.ContextWindow) * s.PressurePercent / 100)
}
