package queue

// entryHeap is a binary min-heap of entries that keeps each entry's index
// current, so an entry can be removed or re-sorted in O(log n) when its pod
// is deleted or updated.
type entryHeap struct {
	items []*entry
	less  func(a, b *entry) bool
	// rekey, if set, refreshes the sort keys an entry keeps of its pod,
	// as the entry enters the heap or is re-sorted after its pod changed.
	rekey func(*entry)
}

func (h *entryHeap) len() int { return len(h.items) }

func (h *entryHeap) peek() *entry {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *entryHeap) push(e *entry) {
	if h.rekey != nil {
		h.rekey(e)
	}
	e.index = len(h.items)
	h.items = append(h.items, e)
	h.up(e.index)
}

func (h *entryHeap) pop() *entry {
	if len(h.items) == 0 {
		return nil
	}
	return h.remove(0)
}

// remove takes out the entry at index i.
func (h *entryHeap) remove(i int) *entry {
	e := h.items[i]
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last {
		h.fix(i)
	}
	e.index = -1
	return e
}

// changed re-sorts the entry at i after its pod changed.
func (h *entryHeap) changed(i int) {
	if h.rekey != nil {
		h.rekey(h.items[i])
	}
	h.fix(i)
}

// fix restores order after the entry at i moved.
func (h *entryHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *entryHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index = i
	h.items[j].index = j
}

func (h *entryHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts the entry at i down and reports whether it moved.
func (h *entryHeap) down(i int) bool {
	start, n := i, len(h.items)
	for {
		left := 2*i + 1
		if left >= n {
			break
		}
		child := left
		if right := left + 1; right < n && h.less(h.items[right], h.items[left]) {
			child = right
		}
		if !h.less(h.items[child], h.items[i]) {
			break
		}
		h.swap(i, child)
		i = child
	}
	return i > start
}
