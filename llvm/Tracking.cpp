// Allocation tracking and escape tracking (CARAT section 4.1.2): calls to the runtime after
// every allocation, before every free, at start-up for globals, around the life of stack
// objects whose address escapes, and after every store of a pointer into memory.
#include "Carat.h"

#include "llvm/Analysis/CaptureTracking.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

using namespace llvm;
using namespace exomem_carat;

namespace {

// How a known allocation function reports its result. Size is an argument index, or
// Product (calloc), or Unknown (the runtime asks malloc_usable_size).
enum class Kind { Alloc, Realloc, Free, PosixMemalign, Getline };
struct KnownFn {
  const char *Name;
  Kind K;
  int SizeArg;   // -1: unknown, -2: calloc's product
};
const KnownFn Known[] = {
    {"malloc", Kind::Alloc, 0},        {"calloc", Kind::Alloc, -2},
    {"realloc", Kind::Realloc, 1},     {"reallocarray", Kind::Realloc, -1},
    {"free", Kind::Free, -1},          {"cfree", Kind::Free, -1},
    {"strdup", Kind::Alloc, -1},       {"strndup", Kind::Alloc, -1},
    {"aligned_alloc", Kind::Alloc, 1}, {"memalign", Kind::Alloc, 1},
    {"valloc", Kind::Alloc, 0},        {"pvalloc", Kind::Alloc, -1},
    {"posix_memalign", Kind::PosixMemalign, 2},
    {"getline", Kind::Getline, -1},    {"getdelim", Kind::Getline, -1},
    // C++ operator new / delete (Itanium mangling), all variants.
    {"_Znwm", Kind::Alloc, 0},         {"_Znam", Kind::Alloc, 0},
    {"_ZnwmRKSt9nothrow_t", Kind::Alloc, 0}, {"_ZnamRKSt9nothrow_t", Kind::Alloc, 0},
    {"_ZnwmSt11align_val_t", Kind::Alloc, 0}, {"_ZnamSt11align_val_t", Kind::Alloc, 0},
    {"_ZnwmSt11align_val_tRKSt9nothrow_t", Kind::Alloc, 0},
    {"_ZnamSt11align_val_tRKSt9nothrow_t", Kind::Alloc, 0},
    {"_ZdlPv", Kind::Free, -1},        {"_ZdaPv", Kind::Free, -1},
    {"_ZdlPvm", Kind::Free, -1},       {"_ZdaPvm", Kind::Free, -1},
    {"_ZdlPvSt11align_val_t", Kind::Free, -1}, {"_ZdaPvSt11align_val_t", Kind::Free, -1},
    {"_ZdlPvmSt11align_val_t", Kind::Free, -1}, {"_ZdaPvmSt11align_val_t", Kind::Free, -1},
};

const KnownFn *known(const CallBase &CB) {
  const Function *F = CB.getCalledFunction();
  if (!F)
    return nullptr;
  StringRef N = F->getName();
  for (const KnownFn &K : Known)
    if (N == K.Name)
      return &K;
  return nullptr;
}

// A call that copies memory (dst, src, len) without being the llvm.memcpy intrinsic: the C
// library's own names, and the ones AddressSanitizer turns the intrinsics into when it runs
// before us in the pipeline.
bool isCopyCall(const CallBase &CB) {
  const Function *F = CB.getCalledFunction();
  if (!F || CB.arg_size() < 3)
    return false;
  StringRef N = F->getName();
  return N == "memcpy" || N == "memmove" || N == "mempcpy" || N == "__memcpy_chk" ||
         N == "__memmove_chk" || N == "__asan_memcpy" || N == "__asan_memmove";
}

// A call that rearranges memory in place (base, count, size) in uninstrumented code: qsort
// moves pointers between slots, so each slot holds a pointer the runtime never heard of.
bool isRearrangeCall(const CallBase &CB) {
  const Function *F = CB.getCalledFunction();
  if (!F || CB.arg_size() < 3 || !CB.getArgOperand(0)->getType()->isPointerTy())
    return false;
  StringRef N = F->getName();
  return N == "qsort" || N == "qsort_r";
}

struct Runtime {
  FunctionCallee Alloc, Realloc, ReallocBegin, Free, Global, StackAlloc, StackRelease, Escape,
      Copy, Rearranged;
  Runtime(Module &M) {
    LLVMContext &C = M.getContext();
    Type *V = Type::getVoidTy(C), *P = PointerType::getUnqual(C), *I64 = Type::getInt64Ty(C);
    Alloc = M.getOrInsertFunction("exo_carat_hook_alloc", V, P, I64, P);
    Realloc = M.getOrInsertFunction("exo_carat_hook_realloc", V, P, P, I64, P);
    ReallocBegin = M.getOrInsertFunction("exo_carat_hook_realloc_begin", V);
    Free = M.getOrInsertFunction("exo_carat_hook_free", V, P);
    Global = M.getOrInsertFunction("exo_carat_hook_global", V, P, I64, P);
    StackAlloc = M.getOrInsertFunction("exo_carat_hook_stack_alloc", V, P, I64, P);
    StackRelease = M.getOrInsertFunction("exo_carat_hook_stack_release", V, P, I64);
    Escape = M.getOrInsertFunction("exo_carat_hook_escape", V, P, P);
    Copy = M.getOrInsertFunction("exo_carat_hook_copy", V, P, P, I64);
    Rearranged = M.getOrInsertFunction("exo_carat_hook_rearranged", V, P, I64);
  }
};

// Where code that runs right after CB returns normally goes.
Instruction *afterCall(CallBase &CB) {
  if (auto *II = dyn_cast<InvokeInst>(&CB)) {
    BasicBlock *Normal = II->getNormalDest();
    if (!Normal->getSinglePredecessor())
      Normal = SplitEdge(II->getParent(), Normal);
    return &*Normal->getFirstInsertionPt();
  }
  return CB.getNextNode();
}

// The unknown-size marker the runtime understands (it asks malloc_usable_size).
Value *unknownSize(IRBuilder<> &B) { return B.getInt64(UINT64_MAX); }

Value *sizeOf(IRBuilder<> &B, CallBase &CB, int SizeArg) {
  if (SizeArg == -2)
    return B.CreateMul(B.CreateZExtOrTrunc(CB.getArgOperand(0), B.getInt64Ty()),
                       B.CreateZExtOrTrunc(CB.getArgOperand(1), B.getInt64Ty()));
  if (SizeArg < 0 || (unsigned)SizeArg >= CB.arg_size())
    return unknownSize(B);
  return B.CreateZExtOrTrunc(CB.getArgOperand(SizeArg), B.getInt64Ty());
}

void trackCall(Module &M, Runtime &R, CallBase &CB, const KnownFn &K, TrackCounts &C) {
  Constant *Site = siteString(M, CB);
  switch (K.K) {
  case Kind::Alloc: {
    IRBuilder<> B(afterCall(CB));
    B.CreateCall(R.Alloc, {&CB, sizeOf(B, CB, K.SizeArg), Site});
    C.Allocs++;
    break;
  }
  case Kind::Realloc: {
    // No move may come between realloc's copy and our hearing of it: the runtime defers
    // stops from _begin until the hook (a move waiting on it times out, never breaks).
    IRBuilder<>(&CB).CreateCall(R.ReallocBegin, {});
    IRBuilder<> B(afterCall(CB));
    B.CreateCall(R.Realloc, {CB.getArgOperand(0), &CB, sizeOf(B, CB, K.SizeArg), Site});
    C.Allocs++;
    break;
  }
  case Kind::Free: {
    IRBuilder<> B(&CB);
    B.CreateCall(R.Free, {CB.getArgOperand(0)});
    C.Frees++;
    break;
  }
  case Kind::PosixMemalign: {
    // int posix_memalign(void **p, size_t al, size_t n): *p is the block when it returns 0.
    IRBuilder<> B(afterCall(CB));
    Value *P = B.CreateLoad(B.getPtrTy(), CB.getArgOperand(0));
    Value *Ok = B.CreateICmpEQ(&CB, ConstantInt::get(CB.getType(), 0));
    B.CreateCall(R.Alloc, {B.CreateSelect(Ok, P, ConstantPointerNull::get(B.getPtrTy())),
                           sizeOf(B, CB, K.SizeArg), Site});
    C.Allocs++;
    break;
  }
  case Kind::Getline: {
    // getline(&line, &n, f) may realloc *line: old value before, new value after.
    IRBuilder<> Before(&CB);
    Value *Old = Before.CreateLoad(Before.getPtrTy(), CB.getArgOperand(0));
    Before.CreateCall(R.ReallocBegin, {});
    IRBuilder<> B(afterCall(CB));
    Value *New = B.CreateLoad(B.getPtrTy(), CB.getArgOperand(0));
    B.CreateCall(R.Realloc, {Old, New, unknownSize(B), Site});
    C.Allocs++;
    break;
  }
  }
}

// The pointer a stored integer came from (p2i), or null.
Value *storedPointer(Value *V) {
  if (V->getType()->isPointerTy())
    return V;
  if (auto *P2I = dyn_cast<PtrToIntInst>(V))
    return P2I->getPointerOperand();
  return nullptr;
}

// A pointer-sized integer that may be a pointer carried as an integer across a call
// (uintptr_t, st.c's st_data_t, a by-value struct or union coerced to integers): a
// function's argument, a call's result, a value taken out of an aggregate or a vector, a
// load, a ptrtoint, or a phi or select of such. Arithmetic on them is not followed (those
// are pointers hidden by arithmetic, which no move can see).
bool integerMayBePointer(Value *V, unsigned Depth = 0) {
  if (Depth > 4)
    return false;
  if (isa<Argument>(V) || isa<LoadInst>(V) || isa<PtrToIntInst>(V) ||
      isa<ExtractValueInst>(V) || isa<ExtractElementInst>(V))
    return true;
  if (auto *CB = dyn_cast<CallBase>(V))
    return !isa<IntrinsicInst>(CB);
  if (auto *PN = dyn_cast<PHINode>(V)) {
    for (Value *In : PN->incoming_values())
      if (In != PN && integerMayBePointer(In, Depth + 1))
        return true;
    return false;
  }
  if (auto *S = dyn_cast<SelectInst>(V))
    return integerMayBePointer(S->getTrueValue(), Depth + 1) ||
           integerMayBePointer(S->getFalseValue(), Depth + 1);
  return false;
}

// A stored non-pointer value that may hold pointer bits: a value of at least 8 bytes that
// was loaded from memory (an integer or vector copy of data whose type the optimiser
// dropped), or a vector built from such values, or a pointer-sized integer that may be a
// pointer passed as an integer (integerMayBePointer).
bool mayCarryPointer(Value *V, const DataLayout &DL) {
  Type *T = V->getType();
  if (T->isPointerTy() || !(T->isIntegerTy() || T->isVectorTy()) ||
      DL.getTypeStoreSize(T).isScalable() || DL.getTypeStoreSize(T).getFixedValue() < 8 ||
      DL.getTypeStoreSize(T).getFixedValue() % 8 != 0 ||
      DL.getTypeSizeInBits(T).getFixedValue() != DL.getTypeStoreSize(T).getFixedValue() * 8)
    return false;
  if (T->isVectorTy() && T->getScalarType()->isPointerTy())
    return false;   // a vector of pointers: bitcast does not apply
  V = V->stripPointerCasts();
  if (isa<LoadInst>(V))
    return true;
  if (T->isVectorTy() && (isa<ShuffleVectorInst>(V) || isa<InsertElementInst>(V)))
    return true;
  if (auto *BC = dyn_cast<BitCastInst>(V))
    return isa<LoadInst>(BC->getOperand(0));
  if (T->isIntegerTy(DL.getPointerSizeInBits()))
    return integerMayBePointer(V);
  return false;
}

// Does Ptr point into a stack object of this function, whichever way the phis and selects
// before it go? A store there needs no escape hook, escaping or not: a move scans every
// stopped thread's stack from its stack pointer up and patches the words there, and a frame
// of this function is live on the storing thread's stack while it stores. (A stack of a
// suspended user-level context, makecontext's, is no thread's and is not scanned: the same
// limit the stores into private stack slots always had.)
bool onOwnStack(Value *Ptr) {
  SmallVector<const Value *, 4> Objs;
  getUnderlyingObjects(Ptr, Objs);
  return !Objs.empty() &&
         all_of(Objs, [](const Value *O) { return isa<AllocaInst>(O); });
}

// A stored pointer can point into a tracked allocation unless each of its underlying
// objects is a constant (null, a global, a function: never moved) or a stack object (never
// moved, and in no tracked allocation: the runtime drops such values anyway).
bool mayPointIntoHeap(Value *V) {
  if (isa<Constant>(V->stripPointerCasts()))
    return false;
  SmallVector<const Value *, 4> Objs;
  getUnderlyingObjects(V, Objs);
  return Objs.empty() || any_of(Objs, [](const Value *O) {
           return !isa<AllocaInst>(O) && !isa<Constant>(O);
         });
}

void trackFunction(Module &M, Runtime &R, Function &F, bool Allocs, bool Escapes,
                   TrackCounts &C) {
  const DataLayout &DL = M.getDataLayout();
  SmallPtrSet<AllocaInst *, 16> EscapingAllocas;
  SmallVector<AllocaInst *, 16> Allocas;
  SmallVector<std::pair<CallBase *, const KnownFn *>, 16> Calls;
  SmallVector<StoreInst *, 32> Stores;
  SmallVector<MemTransferInst *, 8> Copies;
  SmallVector<CallBase *, 8> CopyCalls, RearrangeCalls;
  SmallVector<ReturnInst *, 4> Returns;
  for (BasicBlock &BB : F)
    for (Instruction &I : BB) {
      if (auto *AI = dyn_cast<AllocaInst>(&I)) {
        Allocas.push_back(AI);
        if (AI->isStaticAlloca() && PointerMayBeCaptured(AI, true, true))
          EscapingAllocas.insert(AI);
      } else if (auto *MT = dyn_cast<MemTransferInst>(&I)) {
        Copies.push_back(MT);
      } else if (auto *CB = dyn_cast<CallBase>(&I)) {
        if (const KnownFn *K = known(*CB))
          Calls.push_back({CB, K});
        else if (isCopyCall(*CB))
          CopyCalls.push_back(CB);
        else if (isRearrangeCall(*CB))
          RearrangeCalls.push_back(CB);
      } else if (auto *SI = dyn_cast<StoreInst>(&I)) {
        Stores.push_back(SI);
      } else if (auto *RI = dyn_cast<ReturnInst>(&I)) {
        Returns.push_back(RI);
      }
    }
  if (Allocs) {
    for (auto &[CB, K] : Calls)
      trackCall(M, R, *CB, *K, C);
    uint64_t Registered = 0;
    for (AllocaInst *AI : Allocas) {
      if (!EscapingAllocas.count(AI))
        continue;
      std::optional<TypeSize> Size = AI->getAllocationSize(DL);
      if (!Size || Size->isScalable())
        continue;
      IRBuilder<> B(AI->getNextNode());
      B.CreateCall(R.StackAlloc, {AI, B.getInt64(Size->getFixedValue()), siteString(M, *AI)});
      Registered++;
      C.StackObjects++;
    }
    // One release per return for all of them: the frame's objects lie below the slot of
    // its return address, its callers' above (oniguruma's match_at made eleven calls more
    // per call of it, one per object).
    if (Registered)
      for (ReturnInst *RI : Returns) {
        IRBuilder<> BR(RI);
        Value *FrameEnd = BR.CreateIntrinsic(Intrinsic::addressofreturnaddress,
                                             {BR.getPtrTy()}, {});
        BR.CreateCall(R.StackRelease, {FrameEnd, BR.getInt64(Registered)});
      }
  }
  if (Escapes) {
    // Every hook goes BEFORE its store or copy: a move that stops the thread between the
    // two then finds the slot already known (still holding its old value, left alone) and
    // the value to be stored in a register it patches. After the store, a move in between
    // would miss the slot.
    for (StoreInst *SI : Stores) {
      if (onOwnStack(SI->getPointerOperand()))
        continue;
      Value *V = SI->getValueOperand();
      Value *P = storedPointer(V);
      if (P && !mayPointIntoHeap(P))
        continue;
      IRBuilder<> B(SI);
      if (P) {
        B.CreateCall(R.Escape, {SI->getPointerOperand(), B.CreatePointerCast(P, B.getPtrTy())});
        C.Escapes++;
      } else if (auto *VT = dyn_cast<FixedVectorType>(V->getType());
                 VT && VT->getElementType()->isPointerTy()) {
        // A vector of pointers (two pointers stored at once by the SLP vectoriser).
        for (unsigned L = 0; L < VT->getNumElements(); L++) {
          Value *Slot = B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), SI->getPointerOperand(),
                                                     8 * L);
          B.CreateCall(R.Escape, {Slot, B.CreateExtractElement(V, B.getInt64(L))});
        }
        C.Escapes++;
      } else if (mayCarryPointer(V, DL)) {
        // Memory copied as integers or vectors (a struct copy after SROA): each 8-byte lane
        // may be a pointer; the runtime keeps the ones that point into an allocation.
        unsigned Lanes = DL.getTypeStoreSize(V->getType()).getFixedValue() / 8;
        Value *AsLanes = B.CreateBitCast(V, FixedVectorType::get(B.getInt64Ty(), Lanes));
        for (unsigned L = 0; L < Lanes; L++) {
          Value *Slot = B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), SI->getPointerOperand(),
                                                     8 * L);
          Value *Lane = B.CreateExtractElement(AsLanes, B.getInt64(L));
          B.CreateCall(R.Escape, {Slot, B.CreateIntToPtr(Lane, B.getPtrTy())});
        }
        C.Copies++;
      }
    }
    // qsort: no move while it runs (the bracket realloc uses), and its slots told again after.
    for (CallBase *CB : RearrangeCalls) {
      Instruction *After = afterCall(*CB);
      IRBuilder<>(CB).CreateCall(R.ReallocBegin, {});
      IRBuilder<> B(After);
      Type *I64 = B.getInt64Ty();
      Value *Len = B.CreateMul(B.CreateZExtOrTrunc(CB->getArgOperand(1), I64),
                               B.CreateZExtOrTrunc(CB->getArgOperand(2), I64));
      B.CreateCall(R.Rearranged, {CB->getArgOperand(0), Len});
      C.Copies++;
    }
    // A copy into a stack object of this function, like a store there, needs no hook.
    for (CallBase *CB : CopyCalls) {
      if (onOwnStack(CB->getArgOperand(0)))
        continue;
      IRBuilder<> B(CB);
      B.CreateCall(R.Copy, {CB->getArgOperand(0), CB->getArgOperand(1),
                            B.CreateZExtOrTrunc(CB->getArgOperand(2), B.getInt64Ty())});
      C.Copies++;
    }
    for (MemTransferInst *MT : Copies) {
      auto *Len = dyn_cast<ConstantInt>(MT->getLength());
      if ((Len && Len->getZExtValue() < 8) || onOwnStack(MT->getRawDest()))
        continue;
      IRBuilder<> B(MT);
      B.CreateCall(R.Copy, {MT->getRawDest(), MT->getRawSource(),
                            B.CreateZExtOrTrunc(MT->getLength(), B.getInt64Ty())});
      C.Copies++;
    }
  }
}

// A constructor that tells the runtime about this module's globals before main.
void trackGlobals(Module &M, Runtime &R, TrackCounts &C) {
  const DataLayout &DL = M.getDataLayout();
  SmallVector<GlobalVariable *, 64> Gs;
  for (GlobalVariable &G : M.globals()) {
    if (G.isDeclaration() || G.getName().starts_with("llvm.") ||
        G.getName().starts_with("exomem.carat.") || G.isThreadLocal() ||
        G.hasSection())
      continue;
    Gs.push_back(&G);
  }
  if (Gs.empty())
    return;
  LLVMContext &Ctx = M.getContext();
  Function *Ctor = Function::Create(FunctionType::get(Type::getVoidTy(Ctx), false),
                                    GlobalValue::InternalLinkage, "exomem.carat.globals", M);
  IRBuilder<> B(BasicBlock::Create(Ctx, "entry", Ctor));
  for (GlobalVariable *G : Gs) {
    uint64_t Size = DL.getTypeAllocSize(G->getValueType());
    Constant *Name = B.CreateGlobalStringPtr(G->getName(), "exomem.carat.name");
    B.CreateCall(R.Global, {G, B.getInt64(Size), Name});
    C.Globals++;
  }
  B.CreateRetVoid();
  appendToGlobalCtors(M, Ctor, 0);
}

} // namespace

bool exomem_carat::trackModule(Module &M, ModuleAnalysisManager &, bool Allocs, bool Escapes,
                               TrackCounts &Counts) {
  Runtime R(M);
  for (Function &F : M) {
    if (F.isDeclaration() || isRuntimeFunction(F))
      continue;
    trackFunction(M, R, F, Allocs, Escapes, Counts);
  }
  if (Allocs)
    trackGlobals(M, R, Counts);
  return true;
}
