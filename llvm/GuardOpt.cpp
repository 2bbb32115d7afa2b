// CARAT's guard optimisations (section 4.1.1), applied in this order and counted for the
// paper's Table 1:
//  value range  an access proven inside a stack object or a global (dereferenceable at
//               that point, or at an index whose range, from the conditions that
//               dominate it and scalar evolution, keeps it inside) needs no guard: those
//               objects lie in regions checked at start-up (globals) or by the call guard
//               that made the frame (stack);
//  redundant    a guard dominated by a guard of the same address with at least the same
//               size and rights (the paper's AC/DC available-expression analysis, on SSA
//               values: a dominating check of the same value is available);
//  hoist        a guard of a loop-invariant address that runs on every iteration moves to
//               the loop's preheader, out to the outermost loop that allows it; call guards
//               move out of loops that make no stack allocation;
//  merge        an address that walks an affine range the loop bounds (scalar evolution:
//               {start,+,step} with a computable trip count) is checked once, as a range,
//               in the preheader;
//  coalesce     (ours, not the paper's) the guards left in one basic block whose addresses
//               are one base plus constant offsets (fields of one struct, unrolled array
//               steps) become one check at the first of them over all the bytes they touch,
//               provided everything between them continues to the next instruction: once
//               the first runs, every one of them runs, so a failing wide check is a
//               violation the block was going to make anyway (reported at its first
//               access); then a check at one base drops the guards at that base inside
//               its range that it dominates.
#include "Guards.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Analysis/LazyValueInfo.h"
#include "llvm/Analysis/Loads.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/MustExecute.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Operator.h"
#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

#include <map>

using namespace llvm;
using namespace exomem_carat;

static bool hasDynamicStack(Function &F) {
  for (BasicBlock &BB : F)
    for (Instruction &I : BB) {
      if (auto *AI = dyn_cast<AllocaInst>(&I); AI && !AI->isStaticAlloca())
        return true;
      if (auto *II = dyn_cast<IntrinsicInst>(&I);
          II && II->getIntrinsicID() == Intrinsic::stackrestore)
        return true;
    }
  return false;
}

// The bytes of a global or static stack object, or 0 when not known for certain (a
// declaration, a definition the linker may replace, a variable-sized alloca).
static uint64_t objectSize(const Value *Obj, const DataLayout &DL) {
  if (auto *GV = dyn_cast<GlobalVariable>(Obj)) {
    if (GV->isDeclaration() || GV->isInterposable() || !GV->getValueType()->isSized())
      return 0;
    return DL.getTypeAllocSize(GV->getValueType()).getFixedValue();
  }
  // A stack object only up to the page the frame's call guard checked (Guards.cpp).
  if (auto *AI = dyn_cast<AllocaInst>(Obj))
    if (std::optional<TypeSize> S = AI->getAllocationSize(DL);
        S && !S->isScalable() && S->getFixedValue() <= 4096)
      return S->getFixedValue();
  return 0;
}

// The offsets Ptr - Obj can have at At, through the GEPs from Obj to Ptr: each variable
// index's range as LazyValueInfo (the conditions that dominate At: Oniguruma's
// table[code] under code < 256) and scalar evolution (a byte index, a masked one) give it,
// in wrapping 64-bit arithmetic, so whatever the GEPs' inbounds flags claim. A full set
// when a step is not a GEP.
static ConstantRange offsetRange(Value *Ptr, const Value *Obj, Instruction *At,
                                 const DataLayout &DL, LazyValueInfo &LVI,
                                 ScalarEvolution &SE) {
  ConstantRange Full = ConstantRange::getFull(64), Total(APInt(64, 0));
  Value *P = Ptr->stripPointerCasts();
  while (P != Obj) {
    auto *GEP = dyn_cast<GEPOperator>(P);
    MapVector<Value *, APInt> Var;
    APInt Const(64, 0);
    if (!GEP || !GEP->collectOffset(DL, 64, Var, Const))
      return Full;
    ConstantRange R(Const);
    for (auto &[V, Scale] : Var) {
      if (!V->getType()->isIntegerTy())
        return Full;
      // GEP indices are sign-extended to the pointer's width.
      ConstantRange VR = LVI.getConstantRange(V, At, false).sextOrTrunc(64).intersectWith(
          SE.getSignedRange(SE.getSCEV(V)).sextOrTrunc(64));
      R = R.add(VR.multiply(ConstantRange(Scale)));
    }
    Total = Total.add(R);
    P = GEP->getPointerOperand()->stripPointerCasts();
  }
  return Total;
}

static void valueRange(Function &F, std::vector<Guard> &Gs, DominatorTree &DT,
                       LazyValueInfo &LVI, ScalarEvolution &SE, GuardCounts &C) {
  const DataLayout &DL = F.getParent()->getDataLayout();
  for (Guard &G : Gs) {
    if (G.Removed || (G.K != Guard::Load && G.K != Guard::Store))
      continue;
    const Value *Obj = getUnderlyingObject(G.Ptr);
    if (!isa<AllocaInst>(Obj) && !isa<GlobalVariable>(Obj))
      continue;
    if (isa<AtomicRMWInst, AtomicCmpXchgInst>(G.At))
      continue;   // (before the cast below: their guards are Store guards too)
    Type *Ty = G.K == Guard::Load ? G.At->getType()
                                  : cast<StoreInst>(G.At)->getValueOperand()->getType();
    if (auto *GV = dyn_cast<GlobalVariable>(Obj); GV && GV->isConstant() && G.Access & Write)
      continue;   // a store to a constant: let the guard see it
    if (isDereferenceableAndAlignedPointer(G.Ptr, Ty, Align(1), DL, G.At, nullptr, &DT)) {
      G.Removed = true;
      C.ValueRange++;
      continue;
    }
    // A variable index whose range keeps the access inside the object.
    uint64_t Size = objectSize(Obj, DL);
    if (!Size || G.Size > Size)
      continue;
    ConstantRange R = offsetRange(G.Ptr, Obj, G.At, DL, LVI, SE);
    if (!R.isFullSet() && !R.isEmptySet() && R.getSignedMin().sge(0) &&
        R.getSignedMax().sle(int64_t(Size - G.Size))) {
      G.Removed = true;
      C.ValueRange++;
    }
  }
}

// Does guard A make guard B unnecessary wherever A dominates B?
static bool covers(const Guard &A, const Guard &B) {
  if ((A.Access & B.Access) != B.Access)
    return false;
  if (A.K == Guard::Call || B.K == Guard::Call)
    return A.K == B.K;
  if (A.K == Guard::Range || B.K == Guard::Range || A.K == Guard::Merged ||
      B.K == Guard::Merged)
    return false;
  return A.Ptr->stripPointerCasts() == B.Ptr->stripPointerCasts() && A.Size >= B.Size;
}

static Instruction *placeOf(const Guard &G) { return G.InsertBefore ? G.InsertBefore : G.At; }

static unsigned removeRedundant(std::vector<Guard> &Gs, DominatorTree &DT, bool DynStack) {
  // Group by address (calls form one group), then drop every guard another one covers
  // and dominates. Quadratic only within a group.
  std::map<const Value *, std::vector<Guard *>> Groups;
  for (Guard &G : Gs) {
    if (G.Removed || G.K == Guard::Range || G.K == Guard::Merged)
      continue;
    if (G.K == Guard::Call && DynStack)
      continue;   // the stack pointer moves: every call site checks its own
    Groups[G.K == Guard::Call ? nullptr : G.Ptr->stripPointerCasts()].push_back(&G);
  }
  unsigned N = 0;
  for (auto &[Key, Members] : Groups)
    for (Guard *B : Members)
      for (Guard *A : Members) {
        if (A == B || A->Removed || !covers(*A, *B))
          continue;
        Instruction *PA = placeOf(*A), *PB = placeOf(*B);
        bool Dom = PA == PB ? A < B : DT.dominates(PA, PB);
        if (Dom) {
          B->Removed = true;
          N++;
          break;
        }
      }
  return N;
}

// Runs G's instruction on every iteration that reaches the latch, and is the latch the
// only exit? Then the addresses of iterations 0..trip count are exactly those accessed.
static bool onEveryIteration(const Guard &G, Loop *L, DominatorTree &DT) {
  BasicBlock *Latch = L->getLoopLatch();
  return Latch && L->getExitingBlock() == Latch && DT.dominates(G.At->getParent(), Latch);
}

static void hoist(Function &F, std::vector<Guard> &Gs, LoopInfo &LI, DominatorTree &DT,
                  bool DynStack, GuardCounts &C) {
  for (Guard &G : Gs) {
    if (G.Removed || G.K == Guard::Merged)
      continue;
    Loop *L = LI.getLoopFor(G.At->getParent());
    bool Moved = false;
    while (L && L->getLoopPreheader()) {
      bool Ok;
      if (G.K == Guard::Call) {
        Ok = !DynStack;   // the frame is the same on every iteration
      } else {
        Ok = L->isLoopInvariant(G.Ptr) && (!G.Len || L->isLoopInvariant(G.Len));
        if (Ok) {
          SimpleLoopSafetyInfo Safety;
          Safety.computeLoopSafetyInfo(L);
          Ok = Safety.isGuaranteedToExecute(*G.At, &DT, L);
        }
      }
      if (!Ok)
        break;
      G.InsertBefore = L->getLoopPreheader()->getTerminator();
      Moved = true;
      L = L->getParentLoop();
    }
    if (Moved)
      C.Hoisted++;
  }
  (void)F;
}

// A merged check runs each time the loop is entered; its bounds are computed there. Where
// that costs more than a few instructions, an inner loop entered often with few
// iterations paid more for the check than its guards cost: minimap2's banded alignment
// (ksw_extd2_sse, a vector loop over the band inside a loop over anti-diagonals) ran 55%
// slower with its guards merged than with them in the loop. The budget is in units of
// the cost of one basic instruction (TargetTransformInfo), as LLVM's own expansions count.
static const unsigned MergeBudget = 8;

static void merge(Function &F, std::vector<Guard> &Gs, LoopInfo &LI, DominatorTree &DT,
                  ScalarEvolution &SE, const TargetTransformInfo &TTI, GuardCounts &C) {
  const DataLayout &DL = F.getParent()->getDataLayout();
  for (Guard &G : Gs) {
    if (G.Removed || G.InsertBefore || (G.K != Guard::Load && G.K != Guard::Store))
      continue;
    Loop *L = LI.getLoopFor(G.At->getParent());
    if (!L || !L->getLoopPreheader() || !onEveryIteration(G, L, DT))
      continue;
    auto *AR = dyn_cast<SCEVAddRecExpr>(SE.getSCEV(G.Ptr));
    if (!AR || AR->getLoop() != L || !AR->isAffine())
      continue;
    auto *Step = dyn_cast<SCEVConstant>(AR->getStepRecurrence(SE));
    const SCEV *Trips = SE.getBackedgeTakenCount(L);
    if (!Step || isa<SCEVCouldNotCompute>(Trips))
      continue;
    const SCEV *First = AR->getStart();
    const SCEV *Last = AR->evaluateAtIteration(Trips, SE);
    if (!SE.isLoopInvariant(First, L) || !SE.isLoopInvariant(Last, L))
      continue;
    bool Up = !Step->getAPInt().isNegative();
    Instruction *At = L->getLoopPreheader()->getTerminator();
    SCEVExpander X(SE, DL, "carat.range");
    if (!X.isSafeToExpand(First) || !X.isSafeToExpand(Last))
      continue;
    Type *I64 = Type::getInt64Ty(F.getContext());
    const SCEV *LoS = SE.getPtrToIntExpr(Up ? First : Last, I64);
    const SCEV *HiS = SE.getPtrToIntExpr(Up ? Last : First, I64);
    if (isa<SCEVCouldNotCompute>(LoS) || isa<SCEVCouldNotCompute>(HiS))
      continue;
    HiS = SE.getAddExpr(HiS, SE.getConstant(I64, G.Size));
    if (X.isHighCostExpansion({LoS, HiS}, L, MergeBudget, &TTI, At))
      continue;
    G.Lo = X.expandCodeFor(LoS, I64, At);
    G.Hi = X.expandCodeFor(HiS, I64, At);
    G.K = Guard::Merged;
    G.InsertBefore = At;
    C.Merged++;
  }
}

// The widest coalesced check: the fast path's one-compare form holds up to the runtime's
// minimum span (Guards.cpp).
static const int64_t CoalesceMax = 4096;

namespace {
struct Run {
  Value *Base = nullptr;
  int64_t Lo = 0, Hi = 0;
  int Access = 0;
  std::vector<Guard *> Members;
};
} // namespace

static void closeRun(Run &R, GuardCounts &C) {
  if (R.Members.size() < 2)
    return;
  Guard *First = R.Members.front();
  IRBuilder<> B(First->At);
  First->Ptr = B.CreateConstGEP1_64(B.getInt8Ty(), R.Base, R.Lo, "carat.wide");
  First->Size = uint64_t(R.Hi - R.Lo);
  First->Access = R.Access;
  First->K = Guard::Load; // a plain constant-size check (the kind only picks the emitter)
  for (size_t i = 1; i < R.Members.size(); i++)
    R.Members[i]->Removed = true;
  C.Coalesced += unsigned(R.Members.size() - 1);
}

static void coalesce(Function &F, std::vector<Guard> &Gs, GuardCounts &C) {
  const DataLayout &DL = F.getParent()->getDataLayout();
  std::map<const Instruction *, Guard *> At;
  for (Guard &G : Gs)
    if (!G.Removed && !G.InsertBefore && (G.K == Guard::Load || G.K == Guard::Store) &&
        !isa<AtomicRMWInst, AtomicCmpXchgInst>(G.At))
      At[G.At] = &G;
  for (BasicBlock &BB : F) {
    std::map<const Value *, Run> Open;
    for (Instruction &I : BB) {
      auto It = At.find(&I);
      if (It != At.end()) {
        Guard *G = It->second;
        int64_t Off = 0;
        Value *Base = GetPointerBaseWithConstantOffset(G->Ptr, Off, DL);
        int64_t End = Off + int64_t(G->Size);
        Run &R = Open[Base];
        if (!R.Members.empty() &&
            std::max(R.Hi, End) - std::min(R.Lo, Off) > CoalesceMax) {
          closeRun(R, C);
          R = Run();
        }
        if (R.Members.empty()) {
          R.Base = Base;
          R.Lo = Off;
          R.Hi = End;
        } else {
          R.Lo = std::min(R.Lo, Off);
          R.Hi = std::max(R.Hi, End);
        }
        R.Access |= G->Access;
        R.Members.push_back(G);
      }
      if (!isGuaranteedToTransferExecutionToSuccessor(&I)) {
        for (auto &[K, R] : Open)
          closeRun(R, C);
        Open.clear();
      }
    }
    for (auto &[K, R] : Open)
      closeRun(R, C);
  }
}

// After coalescing: a check at one base over [Lo, Hi) also covers a later guard at the same
// base inside that range, with no more rights, wherever it dominates it (the redundant
// rule with constant offsets).
static void dropCoveredByOffset(Function &F, std::vector<Guard> &Gs, DominatorTree &DT,
                                GuardCounts &C) {
  const DataLayout &DL = F.getParent()->getDataLayout();
  struct Span {
    Guard *G;
    int64_t Lo, Hi;
  };
  std::map<const Value *, std::vector<Span>> ByBase;
  for (Guard &G : Gs) {
    if (G.Removed || G.InsertBefore || (G.K != Guard::Load && G.K != Guard::Store))
      continue;
    int64_t Off = 0;
    const Value *Base = GetPointerBaseWithConstantOffset(G.Ptr, Off, DL);
    ByBase[Base].push_back({&G, Off, Off + int64_t(G.Size)});
  }
  for (auto &[Base, List] : ByBase)
    for (Span &B : List)
      for (Span &A : List) {
        if (&A == &B || A.G->Removed || (A.G->Access & B.G->Access) != B.G->Access ||
            A.Lo > B.Lo || A.Hi < B.Hi || !DT.dominates(A.G->At, B.G->At))
          continue;
        B.G->Removed = true;
        C.Coalesced++;
        break;
      }
}

void exomem_carat::optimizeGuards(Function &F, FunctionAnalysisManager &FAM,
                                  const GuardOptions &O, std::vector<Guard> &Gs,
                                  GuardCounts &C) {
  DominatorTree &DT = FAM.getResult<DominatorTreeAnalysis>(F);
  LoopInfo &LI = FAM.getResult<LoopAnalysis>(F);
  ScalarEvolution &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
  bool DynStack = hasDynamicStack(F);
  if (O.ValueRange)
    valueRange(F, Gs, DT, FAM.getResult<LazyValueAnalysis>(F), SE, C);
  if (O.Redundant)
    C.Redundant += removeRedundant(Gs, DT, DynStack);
  if (O.Hoist) {
    hoist(F, Gs, LI, DT, DynStack, C);
    if (O.Redundant)   // hoisted copies of one check meet in a preheader
      C.Redundant += removeRedundant(Gs, DT, DynStack);
  }
  if (O.Merge)
    merge(F, Gs, LI, DT, SE, FAM.getResult<TargetIRAnalysis>(F), C);
  if (O.Coalesce) {
    coalesce(F, Gs, C);
    dropCoveredByOffset(F, Gs, DT, C);
  }
}

void exomem_carat::prepareLoops(Function &F, FunctionAnalysisManager &FAM) {
  // We run last in the pipeline, where loops need not have preheaders any more: give every
  // loop one (and dedicated exits), so hoisted and merged checks have a place to go.
  DominatorTree &DT = FAM.getResult<DominatorTreeAnalysis>(F);
  LoopInfo &LI = FAM.getResult<LoopAnalysis>(F);
  ScalarEvolution &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
  AssumptionCache &AC = FAM.getResult<AssumptionAnalysis>(F);
  bool Changed = false;
  for (Loop *L : LI.getLoopsInPreorder())
    Changed |= simplifyLoop(L, &DT, &LI, &SE, &AC, nullptr, false);
  if (Changed) {
    PreservedAnalyses PA;
    PA.preserve<DominatorTreeAnalysis>();
    PA.preserve<LoopAnalysis>();
    PA.preserve<ScalarEvolutionAnalysis>();
    PA.preserve<AssumptionAnalysis>();
    FAM.invalidate(F, PA);
  }
}
