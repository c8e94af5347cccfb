package docker

import (
	"errors"
	"math/rand/v2"
	"sync"
)

// uidPool hands out a distinct uid to each concurrent sandbox of a backend.
type uidPool struct {
	mu    sync.Mutex
	r     UIDRange
	inUse map[int]bool
}

func newUIDPool(r UIDRange) *uidPool {
	return &uidPool{r: r, inUse: map[int]bool{}}
}

var errNoFreeUID = errors.New("every uid of the sandbox uid range is in use")

// acquire returns a free uid, starting the search at a random point of the range so that two
// backends sharing a range seldom pick the same one. release gives it back.
func (p *uidPool) acquire() (uid int, release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.r.Last - p.r.First + 1
	start := rand.IntN(n)
	for i := range n {
		uid := p.r.First + (start+i)%n
		if p.inUse[uid] {
			continue
		}
		p.inUse[uid] = true
		var once sync.Once
		return uid, func() {
			once.Do(func() {
				p.mu.Lock()
				delete(p.inUse, uid)
				p.mu.Unlock()
			})
		}, nil
	}
	return 0, nil, errNoFreeUID
}

// reserve marks uid in use (a sandbox another worker made, now this backend's) and reports
// whether it was free; release gives it back.
func (p *uidPool) reserve(uid int) (release func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inUse[uid] {
		return nil, false
	}
	p.inUse[uid] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			delete(p.inUse, uid)
			p.mu.Unlock()
		})
	}, true
}
