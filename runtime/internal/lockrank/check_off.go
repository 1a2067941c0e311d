//go:build !race

package lockrank

// Without the race detector the lock order is not checked: these are
// sync.Mutex's and sync.RWMutex's methods, inlined.

func (m *Mutex[R]) Lock()   { m.mu.Lock() }
func (m *Mutex[R]) Unlock() { m.mu.Unlock() }

func (m *RWMutex[R]) Lock()    { m.mu.Lock() }
func (m *RWMutex[R]) Unlock()  { m.mu.Unlock() }
func (m *RWMutex[R]) RLock()   { m.mu.RLock() }
func (m *RWMutex[R]) RUnlock() { m.mu.RUnlock() }
