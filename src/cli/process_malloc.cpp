// The `tfm` program (and `tfm_bench`, which measures it) run on jemalloc, configured
// here: a program may choose its own process's malloc, the library may not (tensor
// storage has its own cache, tensor/allocator.h). What remains on malloc is small and
// frequent: tensor handles, shapes, autograd nodes, oneDNN's scratch buffers. On
// glibc's malloc those cost 11% of a greedy decoding step of a small model (perf:
// _int_malloc, _int_free, malloc, free, malloc_consolidate), and translation ran 10%
// slower (7.5 -> 8.4 ms per batch). Freed pages are never returned (no decay), so a
// step reuses the last one's scratch instead of faulting in fresh pages; large buffers
// come from one arena (oversize_threshold 0), so that what one thread frees another
// reuses. MALLOC_CONF can still override this.
extern "C" {
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1,oversize_threshold:0";
}
