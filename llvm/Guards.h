// Guards as the optimisations see them, before any code is emitted.
#pragma once

#include "Carat.h"

#include <set>
#include <vector>

namespace exomem_carat {

enum Access { Read = 1, Write = 2 };

struct Guard {
  enum Kind { Load, Store, Call, Range, Merged } K = Load;
  llvm::Instruction *At = nullptr;       // the guarded instruction
  llvm::Value *Ptr = nullptr;            // Load/Store/Range: the address
  uint64_t Size = 0;                     // Load/Store/Call: bytes
  llvm::Value *Len = nullptr;            // Range: bytes (a value)
  llvm::Value *Lo = nullptr, *Hi = nullptr; // Merged: [Lo, Hi) as i64, in the preheader
  int Access = Read;
  llvm::Instruction *InsertBefore = nullptr; // hoisted or merged: where the check goes
  bool Removed = false;
};

// Give every loop of F a preheader and dedicated exits (LoopSimplify).
void prepareLoops(llvm::Function &F, llvm::FunctionAnalysisManager &FAM);
// Versioning (GuardVersion.cpp). The functions of M whose calls cannot reach the runtime
// (so cannot change the fast path's bounds), taken before any code is changed.
using BoundsKeepers = std::set<const llvm::Function *>;
BoundsKeepers findBoundsKeepers(llvm::Module &M);
// May I make the fast path's bounds change and then go on? (A call that does not return
// leaves the code that relied on them for good.)
bool mayCallOut(const llvm::Instruction &I, const BoundsKeepers &Keep);
// Copies loops whose accesses reach a bounded range from loop-invariant bases, entered
// after one check of those ranges; Covered gets the accesses of those copies, which need
// no guard. Counts the loops in C.
void versionLoops(llvm::Function &F, llvm::FunctionAnalysisManager &FAM,
                  const BoundsKeepers &Keep, std::set<const llvm::Instruction *> &Covered,
                  GuardCounts &C);
// A function whose calls keep the bounds checks the ranges its accesses reach from its
// arguments and globals at entry, and calls a guarded copy of itself if any is not inside
// the fast path; Covered gets the accesses that need no guard.
void versionFunction(llvm::Function &F, llvm::FunctionAnalysisManager &FAM,
                     const BoundsKeepers &Keep, std::set<const llvm::Instruction *> &Covered,
                     GuardCounts &C);
// Are loads, stores and calls checked with one compare (-carat-guard-one-compare), an
// access below the region left to fault in the hardware?
bool guardOneCompare();
// EXO_CARAT_FAST_MIN_SPAN in include/exomem/carat.h: the runtime never opens a smaller
// fast path, and an inline guard's limit is the span less this.
constexpr uint64_t MinFastSpan = 4096;
// The runtime's fast-path bound Name (exo_carat_fast_base, _span, _limit, _end) in M
// (runtimeGlobal: addressed directly in a module for an executable).
llvm::GlobalVariable *fastPathGlobal(llvm::Module &M, llvm::StringRef Name);
// Is I a load or a store, and of which address and how many bytes?
bool loadOrStore(llvm::Instruction &I, const llvm::DataLayout &DL, llvm::Value *&Ptr,
                 uint64_t &Size);
std::vector<Guard> collectGuards(llvm::Function &F, const llvm::DataLayout &DL,
                                 GuardCounts &C);
void optimizeGuards(llvm::Function &F, llvm::FunctionAnalysisManager &FAM,
                    const GuardOptions &O, std::vector<Guard> &Gs, GuardCounts &C);

} // namespace exomem_carat
