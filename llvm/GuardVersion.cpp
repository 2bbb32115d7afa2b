// Loop versioning on one wide check (ours, not the paper's). A loop whose accesses use a
// 32-bit index that may wrap (bzip2's block[i1] in mainGtU, with i1 an unsigned that the
// program lets run past nblock) has no affine range scalar evolution can bound by a trip
// count, so merge cannot fold its guards. But every address such an access can form lies
// in a range fixed before the loop starts: base + zext(i32) * 1 reaches [base, base +
// 4 GiB), base + sext(i32) * 2 reaches [base - 4 GiB, base + 4 GiB), a byte masked with
// 0xff indexes 256 entries. Scalar evolution gives that range (the signed range of the
// address minus its pointer base) whatever the loop does.
//
// Such a loop is run in two versions: the preheader checks once that, for every base, the
// whole range its accesses can reach lies inside the one-region fast path, and enters a
// copy of the loop without those accesses' guards if so; otherwise (regions that leave a
// hole near the base, a base near the top or bottom of the address space, no fast path)
// it enters the original loop with every guard, so an access outside the regions is still
// caught there and reported at its own line. The check is sound for any index the loop can
// compute, so nothing about the loop's trip count or exits needs to be known.
//
// Only loops whose calls cannot reach the runtime are versioned (findBoundsKeepers): the
// fast path's bounds change only when the program calls into it (Guards.cpp reads them
// again after every call), so such a loop runs under the bounds its preheader saw. The
// same goes for whole functions (versionFunction, at the end).
#include "Guards.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/LoopUtils.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

using namespace llvm;
using namespace exomem_carat;

// A base's reachable range must be far below any fast path's span (the default region is
// 2^47 bytes): 2^40 keeps the check's arithmetic from wrapping and still takes a 32-bit
// index scaled by up to 256.
static const uint64_t MaxReach = uint64_t(1) << 40;
// Loops and functions are copied whole; a bigger one is left to the other optimisations.
static const unsigned MaxLoopInsts = 4000, MaxFunctionInsts = 4000;
// A function is copied for at least this many guards (a loop for one: it runs them again
// and again).
static const unsigned MinFunctionGuards = 4;
// The guarded copy of a versioned function.
static const char GuardedSuffix[] = ".carat.guarded";

namespace {
// What the preheader checks for one base: [base + Lo, base + Hi) inside the fast path.
struct Reach {
  int64_t Lo = INT64_MAX, Hi = INT64_MIN;
};

struct Candidate {
  Loop *L = nullptr;
  MapVector<Value *, Reach> Bases;            // (in order: the same code every build)
  std::vector<Instruction *> Covered;         // accesses whose guards the copy drops
};
} // namespace

// Library functions that make no callback into the program (so none into the runtime).
// Formatted output is taken as such, as the VAS analysis does (a stream of fopencookie's
// would call the program back).
static const char *const Plain[] = {
    "memcpy",  "memmove",  "memset",  "memcmp",  "memchr",  "strlen",        "strnlen",
    "strcmp",  "strncmp",  "strchr",  "strrchr", "printf",  "fprintf",       "sprintf",
    "snprintf", "puts",    "fputs",   "fputc",   "putc",    "putchar",       "fwrite",
    "__printf_chk", "__fprintf_chk", "__sprintf_chk", "__snprintf_chk"};

static bool isPlainIntrinsic(const Function &F) {
  return F.isIntrinsic() && F.getIntrinsicID() != Intrinsic::experimental_gc_statepoint;
}

// Is a call to this declaration unable to reach the runtime?
static bool plainDeclaration(const Function &F) {
  if (F.isIntrinsic())
    return isPlainIntrinsic(F);
  if (F.doesNotAccessMemory() || F.onlyAccessesArgMemory())
    return true;
  for (const char *N : Plain)
    if (F.getName() == N)
      return true;
  return false;
}

// The fast path's bounds change only in the runtime (exo_carat_set_regions). Calls that
// cannot get there: to intrinsics that lower to plain code or to memcpy and friends, to
// the library functions above or any LLVM knows to touch only its arguments' memory, and
// to functions of this module that make only such calls (found before any is guarded or
// versioned, so the order the functions are visited in does not matter); a call that
// does not return ends the code that relied on the bounds. (Leaving aside a
// signal handler that changes the regions, as the bounds kept in registers and the
// hoisted and merged checks do.)
BoundsKeepers exomem_carat::findBoundsKeepers(Module &M) {
  // The greatest such set: start from every function with a body and drop those with a
  // call that may get there, until none is dropped (so recursive functions that call
  // nothing else stay in).
  BoundsKeepers Keep;
  for (Function &F : M)
    if (!F.isDeclaration() && !F.isInterposable())
      Keep.insert(&F);
  for (bool Shrunk = true; Shrunk;) {
    Shrunk = false;
    for (Function &F : M) {
      if (!Keep.count(&F))
        continue;
      bool Ok = true;
      for (BasicBlock &BB : F)
        for (Instruction &I : BB)
          if (auto *CB = dyn_cast<CallBase>(&I); CB && !CB->doesNotReturn()) {
            const Function *Callee = CB->getCalledFunction();
            if (CB->isInlineAsm() || !Callee ||
                !(Callee->isDeclaration() ? plainDeclaration(*Callee) : Keep.count(Callee) != 0))
              Ok = false;
          }
      if (!Ok) {
        Keep.erase(&F);
        Shrunk = true;
      }
    }
  }
  return Keep;
}

bool exomem_carat::mayCallOut(const Instruction &I, const BoundsKeepers &Keep) {
  auto *CB = dyn_cast<CallBase>(&I);
  if (!CB || CB->doesNotReturn())
    return false;
  const Function *Callee = CB->getCalledFunction();
  if (CB->isInlineAsm() || !Callee)
    return true;
  return Callee->isDeclaration() ? !plainDeclaration(*Callee) : !Keep.count(Callee);
}

// The address range an access at Ptr of Size bytes can touch, as a base and a constant
// range of offsets from it; false if scalar evolution cannot bound it within MaxReach.
// With L, the base must be invariant in L; without, an argument or a global (known at the
// function's entry).
static bool reachOf(ScalarEvolution &SE, Loop *L, Value *Ptr, uint64_t Size, Value *&Base,
                    int64_t &Lo, int64_t &Hi) {
  const SCEV *S = SE.getSCEV(Ptr);
  auto *B = dyn_cast<SCEVUnknown>(SE.getPointerBase(S));
  if (!B)
    return false;
  if (L ? !SE.isLoopInvariant(B, L) : !isa<Argument, GlobalVariable>(B->getValue()))
    return false;
  const SCEV *Off = SE.removePointerBase(S);
  if (isa<SCEVCouldNotCompute>(Off) || (L && SE.isLoopInvariant(Off, L)))
    return false;   // an address invariant in the loop is hoisted instead
  ConstantRange R = SE.getSignedRange(Off);
  if (R.isFullSet() || R.isEmptySet() || R.getBitWidth() > 64)
    return false;
  APInt Min = R.getSignedMin().sextOrTrunc(64), Max = R.getSignedMax().sextOrTrunc(64);
  int64_t L0 = Min.getSExtValue(), H0 = Max.getSExtValue();
  if (L0 < -int64_t(MaxReach) || H0 > int64_t(MaxReach) || Size > 4096)
    return false;
  Base = B->getValue();
  Lo = L0;
  Hi = H0 + int64_t(Size);
  return true;
}

// Can the code of these blocks run under one reading of the fast path, and be copied?
template <typename Blocks>
static bool copyable(const Blocks &BBs, unsigned Max, const BoundsKeepers &Keep) {
  unsigned N = 0;
  for (BasicBlock *BB : BBs) {
    // A computed goto's targets come from blockaddress constants (a static table of them,
    // as in Lua's and Oniguruma's dispatch), which would still name the original blocks.
    if (BB->hasAddressTaken())
      return false;
    for (Instruction &I : *BB) {
      if (++N > Max || mayCallOut(I, Keep) || isa<InvokeInst, CallBrInst, IndirectBrInst>(I))
        return false;
      if (I.getType()->isTokenTy())
        return false;   // cannot be given a phi in the exits
    }
  }
  return true;
}

// Add the accesses of BBs whose reach is bounded from a base available at At to C.
template <typename Blocks>
static void addAccesses(const Blocks &BBs, Loop *L, Instruction *At, ScalarEvolution &SE,
                        DominatorTree &DT, const DataLayout &DL, Candidate &C) {
  for (BasicBlock *BB : BBs)
    for (Instruction &I : *BB) {
      Value *Ptr = nullptr, *Base = nullptr;
      uint64_t Size = 0;
      int64_t Lo = 0, Hi = 0;
      if (!loadOrStore(I, DL, Ptr, Size) || !reachOf(SE, L, Ptr, Size, Base, Lo, Hi))
        continue;
      if (auto *BI = dyn_cast<Instruction>(Base); BI && !DT.dominates(BI, At))
        continue;
      Reach &R = C.Bases[Base];
      R.Lo = std::min(R.Lo, Lo);
      R.Hi = std::max(R.Hi, Hi);
      C.Covered.push_back(&I);
    }
}

// Done: accesses that need no guard already (the function was versioned).
static bool analyse(Loop *L, ScalarEvolution &SE, DominatorTree &DT, const DataLayout &DL,
                    const std::set<const Instruction *> &Done, const BoundsKeepers &Keep,
                    Candidate &C) {
  BasicBlock *PH = L->getLoopPreheader();
  if (!PH || !L->hasDedicatedExits() || !copyable(L->blocks(), MaxLoopInsts, Keep))
    return false;
  addAccesses(L->blocks(), L, PH->getTerminator(), SE, DT, DL, C);
  C.L = L;
  for (Instruction *I : C.Covered)
    if (!Done.count(I))
      return true;
  return false;
}

static void findCandidates(Loop *L, ScalarEvolution &SE, DominatorTree &DT,
                           const DataLayout &DL, const std::set<const Instruction *> &Done,
                           const BoundsKeepers &Keep, std::vector<Candidate> &Out) {
  Candidate C;
  if (analyse(L, SE, DT, DL, Done, Keep, C)) {
    Out.push_back(std::move(C));
    return;   // the copy holds the inner loops too
  }
  for (Loop *Sub : *L)
    findCandidates(Sub, SE, DT, DL, Done, Keep, Out);
}

// ok = AND over bases of (base + Lo - fast_base <= fast_limit) for a reach of at most
// 4 KiB, else of (base + Lo - reach_base <= base + Hi - reach_base <= reach). The two
// differences are Hi - Lo apart (below 2^42); when the first is not above the second the
// range does not wrap, and the second not above the reach puts every single access of it
// inside the fast path or where it faults in the hardware (carat.h:
// exo_carat_fast_reach_base; with -carat-guard-one-compare=false, which is for programs
// that map memory below the kernel's lowest address themselves, the fast path's own base
// and span).
static Value *wideCheck(IRBuilder<> &B, const Candidate &C) {
  Module &M = *B.GetInsertBlock()->getModule();
  Type *I64 = B.getInt64Ty();
  bool Open = guardOneCompare();
  Value *FB = nullptr, *FL = nullptr, *RB = nullptr, *RS = nullptr;
  Value *Ok = nullptr;
  for (auto &[Base, R] : C.Bases) {
    Value *P = B.CreatePtrToInt(Base, I64);
    Value *In;
    if (R.Hi - R.Lo <= int64_t(MinFastSpan)) {
      // A reach of at most the smallest span: its first byte at most limit (span less
      // that minimum) past the base puts it all inside, as an inline guard checks.
      if (!FL) {
        FB = B.CreateLoad(I64, fastPathGlobal(M, "exo_carat_fast_base"), "carat.vbase");
        FL = B.CreateLoad(I64, fastPathGlobal(M, "exo_carat_fast_limit"), "carat.vlimit");
      }
      In = B.CreateICmpULE(B.CreateSub(B.CreateAdd(P, B.getInt64(uint64_t(R.Lo))), FB), FL);
    } else {
      if (!RB) {
        RB = B.CreateLoad(I64, fastPathGlobal(M, Open ? "exo_carat_fast_reach_base"
                                                      : "exo_carat_fast_base"),
                          "carat.rbase");
        RS = B.CreateLoad(I64, fastPathGlobal(M, Open ? "exo_carat_fast_reach"
                                                      : "exo_carat_fast_span"),
                          "carat.reach");
      }
      Value *A = B.CreateSub(B.CreateAdd(P, B.getInt64(uint64_t(R.Lo))), RB);
      Value *Z = B.CreateSub(B.CreateAdd(P, B.getInt64(uint64_t(R.Hi))), RB);
      In = B.CreateAnd(B.CreateICmpULE(A, Z), B.CreateICmpULE(Z, RS));
    }
    Ok = Ok ? B.CreateAnd(Ok, In) : In;
  }
  return Ok;
}

static void version(Function &F, Candidate &C, LoopInfo &LI, DominatorTree &DT,
                    ScalarEvolution &SE) {
  Loop *L = C.L;
  formLCSSARecursively(*L, DT, &LI, &SE);
  BasicBlock *PH = L->getLoopPreheader();
  // PH keeps the check; the loop (the copy without guards) gets a new empty preheader.
  BasicBlock *FastPH = SplitBlock(PH, PH->getTerminator(), &DT, &LI, nullptr, "carat.fast.ph");
  ValueToValueMapTy VMap;
  SmallVector<BasicBlock *, 16> SlowBlocks;
  cloneLoopWithPreheader(FastPH, PH, L, VMap, ".carat.guarded", &LI, &DT, SlowBlocks);
  remapInstructionsInBlocks(SlowBlocks, VMap);
  // The exits (dedicated, in LCSSA form) now have the guarded copy's exiting blocks as
  // predecessors too: give their phis the copy's values.
  SmallVector<BasicBlock *, 8> Exits;
  L->getUniqueExitBlocks(Exits);
  for (BasicBlock *E : Exits)
    for (PHINode &Phi : E->phis()) {
      SmallVector<std::pair<Value *, BasicBlock *>, 4> In;
      for (unsigned i = 0; i < Phi.getNumIncomingValues(); i++)
        if (L->contains(Phi.getIncomingBlock(i)))
          In.push_back({Phi.getIncomingValue(i), Phi.getIncomingBlock(i)});
      for (auto &[V, From] : In) {
        Value *NewV = VMap.count(V) ? (Value *)VMap[V] : V;
        Phi.addIncoming(NewV, cast<BasicBlock>(VMap[From]));
      }
    }
  IRBuilder<> B(PH->getTerminator());
  Value *Ok = wideCheck(B, C);
  BasicBlock *SlowPH = cast<BasicBlock>(VMap[FastPH]);
  B.CreateCondBr(Ok, FastPH, SlowPH);
  PH->getTerminator()->eraseFromParent();
  DT.recalculate(F);
}

void exomem_carat::versionLoops(Function &F, FunctionAnalysisManager &FAM,
                                const BoundsKeepers &Keep,
                                std::set<const Instruction *> &Covered, GuardCounts &Counts) {
  DominatorTree &DT = FAM.getResult<DominatorTreeAnalysis>(F);
  LoopInfo &LI = FAM.getResult<LoopAnalysis>(F);
  ScalarEvolution &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
  const DataLayout &DL = F.getParent()->getDataLayout();
  std::vector<Candidate> Cands;
  if (F.getName().ends_with(GuardedSuffix))
    return;   // its caller's check failed: so would its loops' (and it is cold code)
  for (Loop *L : LI)
    findCandidates(L, SE, DT, DL, Covered, Keep, Cands);
  if (Cands.empty())
    return;
  for (Candidate &C : Cands) {
    version(F, C, LI, DT, SE);
    SE.forgetLoop(C.L);
    Covered.insert(C.Covered.begin(), C.Covered.end());
    Counts.VersionedLoops++;
  }
  FAM.invalidate(F, PreservedAnalyses::none());
}

// Whole functions, for the code outside loops: a function that makes no such call (mainGtU
// compares up to twelve bytes at block[i1 + k] before its loop) checks at entry the ranges
// its accesses can reach from its arguments and globals; if one is not wholly inside the
// fast path it calls a guarded copy of itself with the same arguments and returns its
// result.
static bool versionableFunction(Function &F, const BoundsKeepers &Keep) {
  if (F.isVarArg() || F.getName().ends_with(GuardedSuffix) || F.hasPersonalityFn() ||
      F.callsFunctionThatReturnsTwice())
    return false;
  for (Argument &A : F.args())
    if (A.hasInAllocaAttr() || A.hasPreallocatedAttr() || A.hasSwiftErrorAttr() ||
        A.hasAttribute(Attribute::SwiftSelf) || A.hasAttribute(Attribute::SwiftAsync))
      return false;
  std::vector<BasicBlock *> All;
  for (BasicBlock &BB : F)
    All.push_back(&BB);
  return copyable(All, MaxFunctionInsts, Keep);
}

void exomem_carat::versionFunction(Function &F, FunctionAnalysisManager &FAM,
                                   const BoundsKeepers &Keep,
                                   std::set<const Instruction *> &Covered, GuardCounts &Counts) {
  if (!versionableFunction(F, Keep))
    return;
  DominatorTree &DT = FAM.getResult<DominatorTreeAnalysis>(F);
  ScalarEvolution &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
  const DataLayout &DL = F.getParent()->getDataLayout();
  Candidate C;
  std::vector<BasicBlock *> All;
  for (BasicBlock &BB : F)
    All.push_back(&BB);
  BasicBlock &Entry = F.getEntryBlock();
  addAccesses(All, nullptr, Entry.getTerminator(), SE, DT, DL, C);
  // Worth a copy when the check is much cheaper than the guards: several accesses per base.
  if (C.Covered.size() < MinFunctionGuards || C.Covered.size() < 2 * C.Bases.size())
    return;
  ValueToValueMapTy VMap;
  Function *Guarded = CloneFunction(&F, VMap);
  Guarded->setName(F.getName() + GuardedSuffix);
  Guarded->setLinkage(GlobalValue::InternalLinkage);
  Guarded->setComdat(nullptr);
  Guarded->addFnAttr(Attribute::NoInline);
  Guarded->addFnAttr(Attribute::Cold);
  // Entry: its static allocas stay; the check follows them.
  BasicBlock::iterator At = Entry.getFirstInsertionPt();
  while (isa<AllocaInst>(*At))
    ++At;
  BasicBlock *Body = SplitBlock(&Entry, &*At, &DT, nullptr, nullptr, "carat.fast");
  BasicBlock *Slow = BasicBlock::Create(F.getContext(), "carat.guarded", &F, Body);
  IRBuilder<> SB(Slow);
  SmallVector<Value *, 8> Args;
  for (Argument &A : F.args())
    Args.push_back(&A);
  CallInst *CI = SB.CreateCall(Guarded, Args);
  CI->setTailCall();
  CI->setAttributes(F.getAttributes());
  if (F.getReturnType()->isVoidTy())
    SB.CreateRetVoid();
  else
    SB.CreateRet(CI);
  IRBuilder<> B(Entry.getTerminator());
  Value *Ok = wideCheck(B, C);
  B.CreateCondBr(Ok, Body, Slow);
  Entry.getTerminator()->eraseFromParent();
  Covered.insert(C.Covered.begin(), C.Covered.end());
  Counts.VersionedFunctions++;
  FAM.invalidate(F, PreservedAnalyses::none());
}
