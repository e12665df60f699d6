// A library that links libibverbs and calls it through its PLT; nccl_like loads it with
// RTLD_DEEPBIND, which makes its references bind to libibverbs before any preload.
#include <infiniband/verbs.h>

__attribute__((visibility("default"))) int deepbind_user_fork_init(void) { return ibv_fork_init(); }
