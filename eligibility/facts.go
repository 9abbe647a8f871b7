package eligibility

// The session facts other than tool calls and results: messages, model
// requests, host compaction, pins, restores and manual prunes.

import (
	"github.com/prunesched/prunesched/events"
)

func (c *Core) onMessage(ev events.Event, p *events.Message) {
	tok := p.Tokens
	if tok == 0 {
		tok = events.EstimateTokens(len(p.Text))
	}
	it := c.newItem(p.Item, kMessage, tok)
	if it == nil {
		return
	}
	switch p.Role {
	case events.RoleUser:
		it.msgProt = pUserMessage
	case events.RoleSystem:
		it.msgProt = pSystemPrompt
	}
	c.reference(p.Text)
	c.coldText(p.Text, p.Role == events.RoleAssistant)
}

func (c *Core) onModelRequest() {
	c.requests++
	if its, ok := c.wake[c.requests]; ok {
		delete(c.wake, c.requests)
		for _, it := range its {
			it.recentWake = false
			c.dirty(it)
		}
	}
	if its, ok := c.l4wake[c.requests]; ok {
		delete(c.l4wake, c.requests)
		for _, it := range its {
			c.l4Due(it)
		}
	}
	if its, ok := c.coldWake[c.requests]; ok {
		delete(c.coldWake, c.requests)
		c.coldDue(its)
	}
}

func (c *Core) wakeAt(req int, it *item) {
	c.wake[req] = append(c.wake[req], it)
}

// onCompaction: the host replaced the context; every item so far left it.
// They are never judged again and nothing is emitted for them.
func (c *Core) onCompaction() {
	for i := c.liveFrom; i < c.items.n; i++ {
		c.items.at(i).gone = true
	}
	c.liveFrom = c.items.n
	if c.recOn {
		clear(c.termItems) // the terms left with the items
	}
	c.resetIndexes()
	for _, st := range c.open {
		st.items = nil
	}
}

func (c *Core) onPin(p *events.Pin) {
	it := c.lookup(p.Item)
	if it == nil {
		c.pendingPins[p.Item] = p.By
		return
	}
	it.pinned = true
	it.setRare().pinBy = p.By
	c.dirty(it)
}

func (c *Core) onUnpin(p *events.Unpin) {
	delete(c.pendingPins, p.Item)
	if it := c.lookup(p.Item); it != nil && it.pinned {
		it.pinned = false
		c.dirty(it)
	}
}

func (c *Core) onRestore(p *events.Restore) {
	if it := c.lookup(p.Item); it != nil {
		it.restored = int32(c.causeIdx)
		c.dirty(it)
	}
}

func (c *Core) onPruneRequest(p *events.PruneRequest) {
	if p.By == events.ByAgent {
		c.onAgentRequest(p)
		return
	}
	if it := c.lookup(p.Item); it != nil {
		it.manualAt = int32(c.causeIdx)
		r := it.setRare()
		r.manualBy, r.manualRs = p.By, p.Reason
		c.dirty(it)
	}
}

// onAgentRequest records the agent's request to remove an item: a
// proposal judged at this fact with every protection (see agentStep).
// Assistant text and thinking are not the agent's to remove (the proxy
// refuses them before they become facts); a request naming one is ignored.
func (c *Core) onAgentRequest(p *events.PruneRequest) {
	it := c.lookup(p.Item)
	if it == nil || it.kind == kMessage && it.msgProt == 0 {
		return
	}
	r := it.setRare()
	r.agentRs, r.agentAt, r.agentSet, r.agentOK, r.agentForce = p.Reason, int32(c.causeIdx), true, false, true
	c.dirty(it)
}
