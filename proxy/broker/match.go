package broker

import "bytes"

// matcher finds every occurrence of one pattern in a stream, each as its
// last byte arrives, whatever the reads the stream comes in: a KMP
// automaton whose state (how much of the pattern the stream's end
// matches) is carried from one read to the next, so no byte is looked at
// again when more arrive. Each byte costs at most two comparisons,
// amortised, however long the pattern.
//
// Its failure table is built only as far as the state has reached: a
// response that never resembles a long value costs nothing for it, and a
// scrubber is made for every response.
type matcher struct {
	pattern []byte
	border  []int32 // border[k]: the longest proper prefix of pattern[:k+1] that is also its suffix
	state   int     // pattern[:state] is what the stream ends with; always < len(pattern)

	// examined counts the bytes compared and skipped, the table's
	// building included: what tests bound, since time cannot be.
	examined int
}

// feed runs the matcher over b, appends to ends the offset in b just past
// each occurrence that ends in b (overlapping ones included), and returns
// them.
func (m *matcher) feed(b []byte, ends []int) []int {
	p, border, q, work := m.pattern, m.border, m.state, 0
	for i := 0; i < len(b); i++ {
		if q == 0 {
			// Nothing matched yet: skip to the pattern's first byte at
			// memory speed.
			k := bytes.IndexByte(b[i:], p[0])
			if k < 0 {
				work += len(b) - i
				break
			}
			work += k + 1
			i += k
			q = 1
		} else {
			c := b[i]
			for q > 0 && p[q] != c {
				if q > len(border) {
					border = m.grow(q)
				}
				q = int(border[q-1])
				work++
			}
			work++
			if p[q] == c {
				q++
			}
		}
		// A match under way: extend it as far as the bytes agree.
		for q > 0 && q < len(p) && i+1 < len(b) && p[q] == b[i+1] {
			i++
			q++
			work++
		}
		if q == len(p) {
			ends = append(ends, i+1)
			if q > len(border) {
				border = m.grow(q)
			}
			q = int(border[q-1])
		}
	}
	m.state = q
	m.examined += work
	return ends
}

// grow extends the border table to cover pattern[:q], and returns it.
func (m *matcher) grow(q int) []int32 {
	for k := len(m.border); k < q; k++ {
		j := int32(0)
		if k > 0 {
			j = m.border[k-1]
			for j > 0 && m.pattern[k] != m.pattern[j] {
				j = m.border[j-1]
				m.examined++
			}
			if m.pattern[k] == m.pattern[j] {
				j++
			}
			m.examined++
		}
		m.border = append(m.border, j)
	}
	return m.border
}
