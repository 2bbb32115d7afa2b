// Guards (CARAT section 4.1.1): every load, store, memory intrinsic and call is checked
// against the process's protection regions, after CARAT's optimisations have removed what
// they can (GuardOpt.cpp). A guard is inline code: with one region it compares the address
// with a global the runtime keeps (exo_carat_fast_end, kept in a register; a range with
// exo_carat_fast_base/limit) and calls the runtime only when outside (exo_carat_guard_slow through its preserve_most
// entry, which searches every region, reports a violation and raises SIGSEGV).
#include "Guards.h"

#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Dominators.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"

using namespace llvm;
using namespace exomem_carat;

// Bytes below the stack pointer a call guard checks: the callee's frame, as the paper's
// "maximum stack footprint of the compiler-produced code of the target function" (we use
// one page for every callee rather than computing each callee's frame).
static const uint64_t CallFrameBytes = 4096;

static cl::opt<bool> GuardBoundsInRegisters(
    "carat-guard-bounds-in-registers", cl::init(true),
    cl::desc("exomem CARAT: keep the fast path's bounds in registers (read at entry and "
             "after each call) rather than reading them from memory at each guard"));

static cl::opt<bool> GuardOneCompare(
    "carat-guard-one-compare", cl::init(true),
    cl::desc("exomem CARAT: check a load, store or call by one compare with "
             "exo_carat_fast_end (an access below the region faults in the hardware; "
             "carat.h), rather than two-sided with the fast path's base and limit"));

bool exomem_carat::guardOneCompare() { return GuardOneCompare; }

static bool skipCall(const CallBase &CB) {
  if (CB.isInlineAsm())
    return true;
  const Function *F = CB.getCalledFunction();
  if (F && (F->isIntrinsic() || isRuntimeFunction(*F)))
    return true;
  return false;
}

bool exomem_carat::loadOrStore(Instruction &I, const DataLayout &DL, Value *&Ptr,
                               uint64_t &Size) {
  if (auto *LI = dyn_cast<LoadInst>(&I)) {
    Ptr = LI->getPointerOperand();
    Size = DL.getTypeStoreSize(LI->getType()).getKnownMinValue();
    return true;
  }
  if (auto *SI = dyn_cast<StoreInst>(&I)) {
    Ptr = SI->getPointerOperand();
    Size = DL.getTypeStoreSize(SI->getValueOperand()->getType()).getKnownMinValue();
    return true;
  }
  return false;
}

GlobalVariable *exomem_carat::fastPathGlobal(Module &M, StringRef Name) {
  return runtimeGlobal(M, Name, Type::getInt64Ty(M.getContext()));
}

std::vector<Guard> exomem_carat::collectGuards(Function &F, const DataLayout &DL,
                                               GuardCounts &C) {
  std::vector<Guard> Gs;
  for (BasicBlock &BB : F)
    for (Instruction &I : BB) {
      Guard G;
      G.At = &I;
      if (loadOrStore(I, DL, G.Ptr, G.Size)) {
        bool IsLoad = isa<LoadInst>(I);
        if (auto *GV = dyn_cast<GlobalVariable>(G.Ptr);
            IsLoad && GV && GV->getName().starts_with("exo_carat_fast_"))
          continue;   // a versioned loop's check reading the fast path (GuardVersion.cpp)
        G.K = IsLoad ? Guard::Load : Guard::Store;
        G.Access = IsLoad ? Read : Write;
        ++(IsLoad ? C.Loads : C.Stores);
      } else if (auto *RMW = dyn_cast<AtomicRMWInst>(&I)) {
        G.K = Guard::Store;
        G.Ptr = RMW->getPointerOperand();
        G.Size = DL.getTypeStoreSize(RMW->getValOperand()->getType()).getKnownMinValue();
        G.Access = Read | Write;
        C.Stores++;
      } else if (auto *CX = dyn_cast<AtomicCmpXchgInst>(&I)) {
        G.K = Guard::Store;
        G.Ptr = CX->getPointerOperand();
        G.Size = DL.getTypeStoreSize(CX->getNewValOperand()->getType()).getKnownMinValue();
        G.Access = Read | Write;
        C.Stores++;
      } else if (auto *MI = dyn_cast<MemIntrinsic>(&I)) {
        // memset/memcpy/memmove: the destination written, the source read, len bytes.
        G.K = Guard::Range;
        G.Ptr = MI->getRawDest();
        G.Len = MI->getLength();
        G.Access = Write;
        Gs.push_back(G);
        C.Ranges++;
        if (auto *MT = dyn_cast<MemTransferInst>(MI)) {
          G.Ptr = MT->getRawSource();
          G.Access = Read;
          Gs.push_back(G);
          C.Ranges++;
        }
        continue;
      } else if (auto *CB = dyn_cast<CallBase>(&I)) {
        if (skipCall(*CB))
          continue;
        G.K = Guard::Call;
        G.Size = CallFrameBytes;
        G.Access = Read | Write;
        C.Calls++;
      } else {
        continue;
      }
      Gs.push_back(G);
    }
  return Gs;
}

namespace {
constexpr uint64_t MinSpan = MinFastSpan;

// An address as a base and a constant byte offset from it.
struct BaseOffset {
  Value *Base = nullptr;
  int64_t Off = 0;
};

// Is G's address a base plus a constant offset that, with G's size, stays within the
// runtime's minimum span of the base? (Then a one-compare guard may compare the base.)
bool baseWithinSpan(const Guard &G, BaseOffset &BO) {
  const DataLayout &DL = G.At->getModule()->getDataLayout();
  BO.Base = GetPointerBaseWithConstantOffset(G.Ptr, BO.Off, DL);
  if (!BO.Base || BO.Base == G.Ptr || !BO.Base->getType()->isPointerTy())
    return false;
  return BO.Off >= 0 && uint64_t(BO.Off) + G.Size <= MinSpan;
}

struct Emitter {
  Module &M;
  FunctionCallee Slow;
  GlobalVariable *FastBase, *FastSpan;
  GlobalVariable *FastLimit, *FastEnd;
  Function *ReadReg;
  MDNode *Unlikely;
  // The fast path of the function being guarded, kept in stack slots that are promoted to
  // registers once every guard is in (null: read the globals at each guard): with one
  // compare, its end (less the runtime's minimum span) alone, the other guards reading
  // base and limit from memory; else its base (negated) and its span less the minimum
  // (below; the span is that plus the minimum).
  AllocaInst *BaseSlot = nullptr, *LimitSlot = nullptr, *EndSlot = nullptr;

  explicit Emitter(Module &Mod) : M(Mod) {
    LLVMContext &C = M.getContext();
    Type *I64 = Type::getInt64Ty(C);
    // The runtime's entry that keeps the caller's registers (preserve_most): the cold call
    // then constrains nothing in the hot code around it (src/carat/regions.c).
    Slow = M.getOrInsertFunction("exo_carat_guard_slow_pm", Type::getVoidTy(C), I64, I64,
                                 Type::getInt32Ty(C), PointerType::getUnqual(C));
    if (auto *SF = dyn_cast<Function>(Slow.getCallee()))
      SF->setCallingConv(CallingConv::PreserveMost);
    FastBase = fastPathGlobal(M, "exo_carat_fast_base");
    FastSpan = fastPathGlobal(M, "exo_carat_fast_span");
    FastLimit = fastPathGlobal(M, "exo_carat_fast_limit");
    FastEnd = fastPathGlobal(M, "exo_carat_fast_end");
    ReadReg = Intrinsic::getDeclaration(&M, Intrinsic::read_register, {I64});
    Unlikely = MDBuilder(C).createBranchWeights(1, 1 << 20);
  }

  // Off = A - base; if (!(Off <= limit)) exo_carat_guard_slow(A, Len, Access, site), with
  // limit = span - the runtime's minimum span, for a constant Len up to that minimum: one
  // unsigned compare against one value for every such guard (the span never goes below
  // the minimum, so limit cannot wrap; a closed fast path has a base no access can have).
  // An access in the fast path's last 4 KiB fails it and is passed by the slow path's
  // exact check. (Comparing with span - Len instead is exact, but costs a subtraction at
  // each guard in functions where the span lives in a register.) Otherwise Off <= span
  // && Len <= span - Off, and a Len that may be 0 passes (memcpy(p, q, 0) touches
  // nothing). One instruction's access (Single: a load, store or atomic, the accesses one
  // coalesced check stands for, a call's frame) is, with one compare, A <= end: the
  // fast path's end less the minimum, which the runtime opens only when nothing below the
  // region can be mapped (carat.h: exo_carat_fast_end), so that one faulting instruction
  // stands for the violation below it. Memory intrinsics and ranges keep the two-sided
  // check: a copy may write part of its range before it faults.
  //
  // A one-compare guard of Base + Off, Off a constant with 0 <= Off and Off + Len <= the
  // minimum span, compares Base instead (BaseOff): Base <= end puts the whole access below
  // the fast path's end, and an access below the region still faults in the hardware,
  // while the slow path is given the exact address. The guards of one struct's fields then
  // compare one register that the loads already hold, with no address computed for the
  // compare alone (sqlite3's interpreter loop: see carat-results.md).
  void check(Instruction *Before, Value *A, Value *Len, int Access, const Instruction &SiteOf,
             bool MaybeZero, bool Single, const BaseOffset *BaseOff = nullptr) {
    IRBuilder<> B(Before);
    Type *I64 = B.getInt64Ty();
    Value *Ok;
    auto *CLen = dyn_cast<ConstantInt>(Len);
    bool Fixed = CLen && CLen->getZExtValue() <= MinSpan && (!MaybeZero || !CLen->isZero());
    if (Fixed && Single && GuardOneCompare) {
      Value *End = B.CreateLoad(I64, EndSlot ? (Value *)EndSlot : FastEnd, "carat.end");
      if (BaseOff) {
        Ok = B.CreateICmpULE(B.CreatePtrToInt(BaseOff->Base, I64), End);
        emitSlowCall(Before, Ok, nullptr, Len, Access, SiteOf, BaseOff);
        return;
      }
      Ok = B.CreateICmpULE(A, End);
      emitSlowCall(Before, Ok, A, Len, Access, SiteOf);
      return;
    }
    // In registers the base is kept negated: A + (-base) is one lea that leaves A as it
    // was, where A - base is a copy of A and a subtraction.
    Value *Off = BaseSlot ? B.CreateAdd(A, B.CreateLoad(I64, BaseSlot, "carat.negbase"))
                          : B.CreateSub(A, B.CreateLoad(I64, FastBase, "carat.base"));
    if (Fixed) {
      Value *Limit = B.CreateLoad(I64, LimitSlot ? (Value *)LimitSlot : FastLimit, "carat.limit");
      Ok = B.CreateICmpULE(Off, Limit);
    } else {
      Value *Span = LimitSlot ? B.CreateAdd(B.CreateLoad(I64, LimitSlot, "carat.limit"),
                                            B.getInt64(MinSpan), "carat.span")
                              : (Value *)B.CreateLoad(I64, FastSpan, "carat.span");
      Ok = B.CreateAnd(B.CreateICmpULE(Off, Span), B.CreateICmpULE(Len, B.CreateSub(Span, Off)));
      if (MaybeZero)
        Ok = B.CreateOr(Ok, B.CreateICmpEQ(Len, ConstantInt::get(I64, 0)));
    }
    emitSlowCall(Before, Ok, A, Len, Access, SiteOf);
  }

  // if (!Ok) the slow path, before Before. With BaseOff, the address is computed on the
  // slow path only (A is null), so that the hot path keeps no register for it.
  void emitSlowCall(Instruction *Before, Value *Ok, Value *A, Value *Len, int Access,
                    const Instruction &SiteOf, const BaseOffset *BaseOff = nullptr) {
    IRBuilder<> B(Before);
    Instruction *Then =
        SplitBlockAndInsertIfThen(B.CreateNot(Ok), Before, false, Unlikely);
    IRBuilder<> T(Then);
    if (BaseOff)
      A = T.CreatePtrToInt(T.CreateConstGEP1_64(T.getInt8Ty(), BaseOff->Base, BaseOff->Off),
                           T.getInt64Ty());
    T.CreateCall(Slow, {A, Len, T.getInt32(Access), siteString(M, SiteOf)})
        ->setCallingConv(CallingConv::PreserveMost);
  }

  // The bounds change only when the program calls into the runtime (exo_carat_set_regions,
  // or a SIGSEGV handler after a violation): read them at entry and after every call, not at
  // every guard, so that the backend keeps them in registers through loops. Not in functions
  // with invoke (exception edges) or setjmp (registers are not restored by longjmp).
  void beginFunction(Function &F) {
    BaseSlot = LimitSlot = EndSlot = nullptr;
    if (!GuardBoundsInRegisters || F.callsFunctionThatReturnsTwice())
      return;
    for (BasicBlock &BB : F)
      for (Instruction &I : BB)
        if (isa<InvokeInst>(I) || isa<CallBrInst>(I))
          return;
    BasicBlock &Entry = F.getEntryBlock();
    IRBuilder<> B(&Entry, Entry.getFirstInsertionPt());
    Type *I64 = B.getInt64Ty();
    if (GuardOneCompare) {
      EndSlot = B.CreateAlloca(I64, nullptr, "carat.end.slot");
    } else {
      BaseSlot = B.CreateAlloca(I64, nullptr, "carat.base.slot");
      LimitSlot = B.CreateAlloca(I64, nullptr, "carat.limit.slot");
    }
    reload(B);
  }

  void reload(IRBuilder<> &B) {
    Type *I64 = B.getInt64Ty();
    if (EndSlot) {
      B.CreateStore(B.CreateLoad(I64, FastEnd), EndSlot);
      return;
    }
    B.CreateStore(B.CreateNeg(B.CreateLoad(I64, FastBase)), BaseSlot);
    B.CreateStore(B.CreateLoad(I64, FastLimit), LimitSlot);
  }

  // Reads the bounds again after each call that may reach the runtime (the slow path's
  // own calls among them: a SIGSEGV handler may change the regions and return); not after
  // calls that cannot (Keep: plain library calls, functions of the module that make only
  // such calls), which leave the registers as they were.
  void endFunction(Function &F, const BoundsKeepers &Keep) {
    if (!BaseSlot && !EndSlot)
      return;
    SmallVector<CallBase *, 32> Calls;
    for (BasicBlock &BB : F)
      for (Instruction &I : BB)
        if (auto *CB = dyn_cast<CallBase>(&I);
            CB && !isa<IntrinsicInst>(CB) && mayCallOut(*CB, Keep))
          Calls.push_back(CB);
    for (CallBase *CB : Calls)
      if (Instruction *Next = CB->getNextNode()) {
        IRBuilder<> B(Next);
        reload(B);
      }
    DominatorTree DT(F);
    if (EndSlot)
      PromoteMemToReg({EndSlot}, DT);
    else
      PromoteMemToReg({BaseSlot, LimitSlot}, DT);
    BaseSlot = LimitSlot = EndSlot = nullptr;
  }

  void emit(Guard &G) {
    Instruction *Before = G.InsertBefore ? G.InsertBefore : G.At;
    IRBuilder<> B(Before);
    Type *I64 = B.getInt64Ty();
    switch (G.K) {
    case Guard::Load:
    case Guard::Store: {
      BaseOffset BO;
      bool UseBase = GuardOneCompare && baseWithinSpan(G, BO);
      check(Before, UseBase ? nullptr : B.CreatePtrToInt(G.Ptr, I64), B.getInt64(G.Size),
            G.Access, *G.At, false, true, UseBase ? &BO : nullptr);
      break;
    }
    case Guard::Range:
      check(Before, B.CreatePtrToInt(G.Ptr, I64), B.CreateZExtOrTrunc(G.Len, I64), G.Access,
            *G.At, true, false);
      break;
    case Guard::Merged:
      check(Before, G.Lo, B.CreateSub(G.Hi, G.Lo), G.Access, *G.At, true, false);
      break;
    case Guard::Call: {
      MDNode *Rsp = MDNode::get(M.getContext(), MDString::get(M.getContext(), "rsp"));
      Value *Sp = B.CreateCall(ReadReg, {MetadataAsValue::get(M.getContext(), Rsp)});
      check(Before, B.CreateSub(Sp, B.getInt64(G.Size)), B.getInt64(G.Size), G.Access, *G.At,
            false, true);
      break;
    }
    }
  }
};
} // namespace

bool exomem_carat::guardModule(Module &M, ModuleAnalysisManager &MAM, const GuardOptions &O,
                               GuardCounts &C) {
  FunctionAnalysisManager &FAM =
      MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
  Emitter E(M);
  bool Changed = false;
  // Versioning and the bounds kept in registers across calls both need to know which
  // calls cannot change the bounds; judged before any code changes.
  BoundsKeepers Keep = findBoundsKeepers(M);
  for (Function &F : M) {
    if (F.isDeclaration() || isRuntimeFunction(F))
      continue;
    prepareLoops(F, FAM);
    std::set<const Instruction *> Covered;
    if (O.Version) {
      versionFunction(F, FAM, Keep, Covered, C);
      versionLoops(F, FAM, Keep, Covered, C);
    }
    std::vector<Guard> Gs = collectGuards(F, M.getDataLayout(), C);
    if (Gs.empty())
      continue;
    for (Guard &G : Gs)
      if (Covered.count(G.At)) {
        G.Removed = true;
        C.Versioned++;
      }
    optimizeGuards(F, FAM, O, Gs, C);
    E.beginFunction(F);
    for (Guard &G : Gs)
      if (!G.Removed) {
        E.emit(G);
        C.Final++;
      }
    E.endFunction(F, Keep);
    FAM.invalidate(F, PreservedAnalyses::none());
    Changed = true;
  }
  return Changed;
}
