// The radix prefix cache, SGLang's RadixCache over blocks: the cached
// prompts form a tree, and space is won back by evicting whole leaves,
// least recently used first.

package sim

import (
	"container/heap"
	"slices"
)

// radixCache is a replica's KV cache in blocks with a prefix tree over it.
// An edge of the tree is a run of full prompt blocks, named by their
// chained hashes; a node splits where two prompts part. A running sequence
// holds the path from the root to the deepest node of its prompt, so a
// node is held at least as long as any below it. A node no sequence holds
// and with no children is a leaf that may be evicted: the least recently
// used first, and whole, as SGLang evicts a node. A shared prefix is thus
// never evicted before the branches that hang from it, and evicting may
// free more blocks than were needed. A block a sequence computed that the
// tree already holds, because another sequence cached it meanwhile, is
// freed when the sequence joins the tree, as SGLang frees it. radixCache is
// not safe for concurrent use: the engine's mutex guards it.
type radixCache struct {
	blockSize int
	total     int // capacity in blocks

	private   int // blocks held by sequences outside the tree
	cached    int // blocks in the tree
	evictable int // blocks in tree nodes no sequence holds
	root      radixNode
	leaves    leafHeap // the evictable leaves, least recently used first
	clock     uint64   // advances at each lock and unlock; orders uses
}

// radixNode is a node of the prefix tree: the run of blocks on the edge
// into it.
type radixNode struct {
	parent    *radixNode
	children  map[uint64]*radixNode // key: the first hash of the child's run
	hashes    []uint64              // chained hashes of its blocks; empty for the root
	refs      int                   // running sequences whose path passes through it
	used      uint64                // the cache's clock when last locked or unlocked
	heapIndex int                   // its place in leaves; -1 when not there
}

func newRadixCache(blockSize, total int) *radixCache {
	k := &radixCache{blockSize: blockSize, total: total}
	k.root.children = make(map[uint64]*radixNode)
	k.root.heapIndex = -1
	return k
}

// free is how many blocks hold nothing at all.
func (k *radixCache) free() int { return k.total - k.private - k.cached }

// used is how many blocks running sequences hold.
func (k *radixCache) used() int { return k.private + k.cached - k.evictable }

// capacity is the cache's size in blocks.
func (k *radixCache) capacity() int { return k.total }

// blocksFor is how many blocks n tokens fill.
func (k *radixCache) blocksFor(n int) int { return (n + k.blockSize - 1) / k.blockSize }

// match is how many of a prompt's leading full blocks are in the tree, at
// most limit.
func (k *radixCache) match(hashes []uint64, limit int) int {
	n, _ := k.walk(hashes[:min(limit, len(hashes))], nil)
	return n
}

// walk follows hashes down the tree from the root and returns how many of
// them it found and the unheld blocks among those. With split, it also
// splits the node where the match ends mid-run, so that a node ends there,
// and sets *split to the node where the matched blocks end (the root when
// none matched).
func (k *radixCache) walk(hashes []uint64, split **radixNode) (n, unheld int) {
	node := &k.root
	for n < len(hashes) {
		child := node.children[hashes[n]]
		if child == nil {
			break
		}
		i := 0
		for i < len(child.hashes) && n < len(hashes) && child.hashes[i] == hashes[n] {
			i++
			n++
		}
		if child.refs == 0 {
			unheld += i
		}
		if i < len(child.hashes) {
			if split != nil {
				node = k.split(child, i)
			}
			break
		}
		node = child
	}
	if split != nil {
		*split = node
	}
	return n, unheld
}

// split cuts node's run after its first i blocks into a new parent, and
// returns that parent. The parent is held and used as node is.
func (k *radixCache) split(node *radixNode, i int) *radixNode {
	mid := &radixNode{
		parent:    node.parent,
		children:  map[uint64]*radixNode{node.hashes[i]: node},
		hashes:    node.hashes[:i:i],
		refs:      node.refs,
		used:      node.used,
		heapIndex: -1,
	}
	node.parent.children[mid.hashes[0]] = mid
	node.parent = mid
	node.hashes = node.hashes[i:]
	return mid
}

// allocate gives s its blocks: the first hit of its prompt blocks from the
// tree, and need-hit new ones, evicting leaves if it must. It reports
// false, changing nothing, when they do not fit.
func (k *radixCache) allocate(s *seq, hit, need int) bool {
	fresh := need - hit
	if _, unheld := k.walk(s.hashes[:hit], nil); k.free()+k.evictable-unheld < fresh {
		return false
	}
	var node *radixNode
	k.walk(s.hashes[:hit], &node)
	k.lock(node)
	for k.free() < fresh {
		k.evict()
	}
	s.node = node
	k.private += fresh
	s.private = fresh
	return true
}

// promote adds s's prefilled full prompt blocks past the first hit to the
// tree below the node s holds, and moves s's hold to the deepest of them.
// Blocks the tree gained meanwhile from another sequence are shared, and
// s's own copies of them freed.
func (k *radixCache) promote(s *seq, hit int) {
	node, rest := s.node, s.hashes[hit:]
	for len(rest) > 0 {
		child := node.children[rest[0]]
		if child == nil {
			break
		}
		i := 0
		for i < len(child.hashes) && i < len(rest) && child.hashes[i] == rest[i] {
			i++
		}
		if i < len(child.hashes) {
			child = k.split(child, i)
		}
		node, rest = child, rest[i:]
	}
	if len(rest) > 0 {
		leaf := &radixNode{parent: node, hashes: slices.Clone(rest), heapIndex: -1}
		if node.children == nil {
			node.children = make(map[uint64]*radixNode)
		}
		node.children[rest[0]] = leaf
		k.cached += len(rest)
		k.evictable += len(rest) // unheld until the lock below
		node = leaf
	}
	moved := len(s.hashes) - hit
	k.private -= moved
	s.private -= moved
	k.lock(node)
	k.unlock(s.node)
	s.node = node
}

// release returns s's blocks: its private ones are freed, and the nodes of
// its path that nothing else holds become evictable.
func (k *radixCache) release(s *seq) {
	if s.node != nil {
		k.unlock(s.node)
		s.node = nil
	}
	k.private -= s.private
	s.private = 0
}

// lock holds the path from node up to the root for one more sequence.
func (k *radixCache) lock(node *radixNode) {
	k.clock++
	for n := node; n != &k.root; n = n.parent {
		if n.refs == 0 {
			k.evictable -= len(n.hashes)
			if n.heapIndex >= 0 {
				heap.Remove(&k.leaves, n.heapIndex)
			}
		}
		n.refs++
		n.used = k.clock
	}
}

// unlock lets go of the path from node up to the root for one sequence; a
// leaf nothing holds any more becomes evictable.
func (k *radixCache) unlock(node *radixNode) {
	k.clock++
	for n := node; n != &k.root; n = n.parent {
		n.refs--
		n.used = k.clock
		if n.refs == 0 {
			k.evictable += len(n.hashes)
			if len(n.children) == 0 {
				heap.Push(&k.leaves, n)
			}
		}
	}
}

// evict drops the least recently used evictable leaf whole; its parent
// becomes an evictable leaf when it has no other child and nothing holds
// it. There must be one.
func (k *radixCache) evict() {
	n := heap.Pop(&k.leaves).(*radixNode)
	k.cached -= len(n.hashes)
	k.evictable -= len(n.hashes)
	p := n.parent
	delete(p.children, n.hashes[0])
	n.parent = nil
	if p != &k.root && p.refs == 0 && len(p.children) == 0 {
		heap.Push(&k.leaves, p)
	}
}

// leafHeap orders evictable leaves by when they were last used.
type leafHeap []*radixNode

func (h leafHeap) Len() int           { return len(h) }
func (h leafHeap) Less(i, j int) bool { return h[i].used < h[j].used }
func (h leafHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}
func (h *leafHeap) Push(x any) {
	n := x.(*radixNode)
	n.heapIndex = len(*h)
	*h = append(*h, n)
}
func (h *leafHeap) Pop() any {
	old := *h
	n := old[len(old)-1]
	old[len(old)-1] = nil
	n.heapIndex = -1
	*h = old[:len(old)-1]
	return n
}
