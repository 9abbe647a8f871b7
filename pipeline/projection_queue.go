package pipeline

import "sync"

// projQueue hands messages from the consumer's callback to the decoder:
// push waits while max messages are queued; take returns everything
// queued as one batch, so batches grow only when the decoder falls behind
// and a lone message is passed on at once.
type projQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	msgs   []projRaw
	spare  []projRaw // a taken batch given back, reused by take
	max    int
	closed bool
}

func newProjQueue(max int) *projQueue {
	q := &projQueue{max: max}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push queues m; after close it drops it.
func (q *projQueue) push(m projRaw) {
	q.mu.Lock()
	for len(q.msgs) >= q.max && !q.closed {
		q.cond.Wait()
	}
	if !q.closed {
		q.msgs = append(q.msgs, m)
		if len(q.msgs) == 1 {
			q.cond.Broadcast()
		}
	}
	q.mu.Unlock()
}

// take waits for messages and returns all of them, or nil once the queue
// is closed and empty.
func (q *projQueue) take() []projRaw {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.msgs) == 0 && !q.closed {
		q.cond.Wait()
	}
	batch := q.msgs
	q.msgs, q.spare = q.spare[:0], nil
	if len(batch) >= q.max {
		q.cond.Broadcast()
	}
	if len(batch) == 0 {
		return nil
	}
	return batch
}

// recycle gives back a batch returned by take once it is done with.
func (q *projQueue) recycle(batch []projRaw) {
	clear(batch)
	q.mu.Lock()
	if cap(batch) > cap(q.spare) {
		q.spare = batch[:0]
	}
	q.mu.Unlock()
}

// close makes push drop and take return nil once the queue is empty.
func (q *projQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}
