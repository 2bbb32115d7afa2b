// The exomem CARAT pass plugin: what its parts share.
//
// Parts (each can be switched on alone, see Plugin.cpp's options):
//   tracking  - every allocation and free (heap, globals, escaping stack objects)
//   escapes   - every store of a pointer into memory
//   guards    - checks of loads, stores and calls against the protection regions,
//               with CARAT's optimisations (GuardOpt.cpp)
//   vas       - SpaceJMP's VAS-safety analysis (VasSafety.cpp per function, VasSummary.cpp
//               across the functions of a module)
// The runtime the inserted calls go to is src/carat in libexomem.
#pragma once

#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"

#include <string>

namespace exomem_carat {

// Runtime functions are never instrumented (the runtime is not compiled with the plugin,
// but a program may call into it, and its hooks must not recurse).
bool isRuntimeFunction(const llvm::Function &F);

// A private constant string naming where I is ("file:line" with debug info, else the
// function's name), for the runtime's reports.
llvm::Constant *siteString(llvm::Module &M, const llvm::Instruction &I);

// The runtime's global Name (data, not a function), declared in M with type Ty if it is not
// there. In a module for an executable (PIE or not position-independent), which has the
// runtime linked in (exomem-cc), it is addressed directly, not through the GOT; a module
// built for a shared library keeps the GOT.
llvm::GlobalVariable *runtimeGlobal(llvm::Module &M, llvm::StringRef Name, llvm::Type *Ty);

// Allocation and escape tracking on M; returns whether M changed.
struct TrackCounts {
  unsigned Allocs = 0, Frees = 0, StackObjects = 0, Globals = 0, Escapes = 0, Copies = 0;
  unsigned Pins = 0;   // pointers printed with %p: pinned before the call
};
bool trackModule(llvm::Module &M, llvm::ModuleAnalysisManager &MAM, bool Allocations,
                 bool Escapes, TrackCounts &Counts);

// Guards: the counts behind the paper's Table 1, per module.
struct GuardCounts {
  unsigned Loads = 0, Stores = 0, Calls = 0, Ranges = 0; // naive guards by kind
  unsigned ValueRange = 0;  // proven in bounds of a stack object or global: none needed
  unsigned Redundant = 0;   // an equal or wider check dominates it
  unsigned Hoisted = 0;     // loop-invariant: checked once before the loop
  unsigned Merged = 0;      // walks a range the loop bounds: one range check before it
  unsigned Coalesced = 0;   // folded into a check of the same base: earlier in its block, or
                            // a dominating one whose range holds it
  unsigned Versioned = 0;   // in the copy of a loop entered after one wide check of the
                            // ranges its bases can reach: none needed (GuardVersion.cpp)
  unsigned VersionedLoops = 0, VersionedFunctions = 0; // loops and functions so copied
  unsigned Final = 0;       // guards left in the code (hoisted and merged ones included)
  unsigned naive() const { return Loads + Stores + Calls + Ranges; }
};
struct GuardOptions {
  bool ValueRange = true, Redundant = true, Hoist = true, Merge = true, Coalesce = true,
       Version = true;
};
bool guardModule(llvm::Module &M, llvm::ModuleAnalysisManager &MAM, const GuardOptions &O,
                 GuardCounts &Counts);

// SpaceJMP VAS safety: returns whether M changed; Unsafe gets the dereferences it could not
// prove safe (each reported on stderr), Checked the checks it inserted.
struct VasCounts {
  unsigned Derefs = 0, ProvenSafe = 0, Checked = 0, Unsafe = 0;
};
bool vasSafetyModule(llvm::Module &M, llvm::ModuleAnalysisManager &MAM, VasCounts &Counts);

} // namespace exomem_carat
