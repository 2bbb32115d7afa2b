"""Report section: the six applications of Appel and Li's primitives (apps/, docs/appel-li.md)."""

KEY = "appel_apps"
TITLE = "Appel-Li applications: collectors, checkpoints, shared virtual memory, a persistent store, a guard-page heap, compression paging, swizzling"
ORDER = 210
PROGRAMS = ["bench_app_baker", "bench_app_gengc", "bench_app_ckpt", "bench_app_pstore",
            "bench_app_dsm", "bench_app_guardheap", "bench_app_comppage",
            "bench_app_swizzle"]
INTRO = ("Each application of the paper's Section 2, built on the primitives of "
         "<code>exomem/vm.h</code> and measured against the usual way of doing the same thing "
         "without them (the baseline column): a concurrent Baker collector against a "
         "stop-the-world copy (pause times), a generational collector whose remembered set "
         "comes from DIRTY against a card-marking write barrier, a concurrent incremental "
         "checkpoint against stop-and-copy, a persistent store whose commit writes only dirty "
         "pages against writing the whole heap, Li's shared virtual memory between processes "
         "(faults, page transfers and update rates against one process), a heap grown from "
         "a guard page's fault handler against a bounds check on every allocation, and "
         "data-compression paging (the pager's compressed store) against the kernel's own "
         "compressed swap, zram, with the same memory budget (updates per second, and the "
         "memory the compressed pages take), and extending addressability by pointer "
         "swizzling at page-fault time (a persistent tree 16 times the address window it is "
         "used through) against mapping the whole store and decoding every pointer. "
         "docs/appel-li.md says how each works and how to run it alone.")
