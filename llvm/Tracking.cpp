// Allocation tracking and escape tracking (CARAT section 4.1.2): calls to the runtime after
// every allocation, before every free, at start-up for globals, around the life of stack
// objects whose address escapes, and after every store of a pointer into memory.
#include "Carat.h"
#include "carat/carat_abi.h"

#include "llvm/Analysis/CaptureTracking.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

using namespace llvm;
using namespace exomem_carat;

static cl::opt<bool> OptInline(
    "carat-inline-hooks", cl::init(true),
    cl::desc("exomem CARAT: append escapes to the log and register stack objects inline, "
             "calling the runtime only on the rare path"));

static cl::opt<bool> OptShadow(
    "carat-escape-shadow", cl::init(false),
    cl::desc("exomem CARAT: keep escapes in the runtime's shadow (one store of the pointer "
             "at a fixed distance below the slot) instead of the escape log"));

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
  FunctionCallee Alloc, AllocNew, Realloc, ReallocBegin, Free, FreeDelete, Global, StackAlloc,
      StackRelease, Escape, Copy, Rearranged, Pin, ShadowInit;
  // What the inline code reads and writes (carat_abi.h): the runtime's state, which starts
  // with the table's bounds; the thread's exo_carat_tls; a constant log length that says
  // "full", read instead of the log's when the thread has no log yet.
  GlobalVariable *State, *Tls, *Full;
  Runtime(Module &M) {
    LLVMContext &C = M.getContext();
    Type *I8 = Type::getInt8Ty(C);
    State = runtimeGlobal(M, "exo_carat", I8);
    Tls = cast<GlobalVariable>(M.getOrInsertGlobal("exo_carat_tls", I8, [&] {
      return new GlobalVariable(M, I8, false, GlobalValue::ExternalLinkage, nullptr,
                                "exo_carat_tls", nullptr,
                                GlobalValue::InitialExecTLSModel);
    }));
    Full = nullptr;   // made with the first inline append
    Type *V = Type::getVoidTy(C), *P = PointerType::getUnqual(C), *I64 = Type::getInt64Ty(C);
    Alloc = M.getOrInsertFunction("exo_carat_hook_alloc", V, P, I64, P);
    AllocNew = M.getOrInsertFunction("exo_carat_hook_alloc_new", V, P, I64, P);
    Realloc = M.getOrInsertFunction("exo_carat_hook_realloc", V, P, P, I64, P);
    ReallocBegin = M.getOrInsertFunction("exo_carat_hook_realloc_begin", V, P);
    Free = M.getOrInsertFunction("exo_carat_hook_free", V, P);
    FreeDelete = M.getOrInsertFunction("exo_carat_hook_delete", V, P);
    Global = M.getOrInsertFunction("exo_carat_hook_global", V, P, I64, P);
    StackAlloc = M.getOrInsertFunction("exo_carat_hook_stack_alloc", V, P, I64, P);
    StackRelease = M.getOrInsertFunction("exo_carat_hook_stack_release", V, P, I64);
    Escape = M.getOrInsertFunction("exo_carat_hook_escape", V, P, P);
    Copy = M.getOrInsertFunction("exo_carat_hook_copy", V, P, P, I64);
    Rearranged = M.getOrInsertFunction("exo_carat_hook_rearranged", V, P, I64);
    Pin = M.getOrInsertFunction("exo_carat_hook_pin", V, P);
    ShadowInit = M.getOrInsertFunction("exo_carat_hook_shadow_init", V);
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

// May inline code that branches go before I? Not in the entry block before a static
// alloca: the split would move the alloca out of the entry block, and a dynamic alloca costs
// the function a frame pointer and a stack adjustment on every call.
bool maySplitBefore(Instruction *I) {
  BasicBlock &Entry = I->getFunction()->getEntryBlock();
  if (I->getParent() != &Entry)
    return true;
  AllocaInst *Last = nullptr;   // the entry block's last alloca
  for (Instruction &J : Entry)
    if (auto *AI = dyn_cast<AllocaInst>(&J))
      Last = AI;
  return !Last || Last->comesBefore(I);
}

Value *byteGEP(IRBuilder<> &B, Value *Base, uint64_t Off) {
  return Off ? B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), Base, Off) : Base;
}

// Tell the runtime, before the store at Before, that Slot is about to hold Val: the escape
// hook, its common case inline (exo_carat_hook_escape; the layout is carat_abi.h's). A value
// outside [lo, hi] of the table, and a slot in the thread's own stack (a move scans it), are
// dropped, as the hook drops them; anything else is appended to the thread's log, value,
// slot, then count, in that order (a move may stop the thread between any two:
// exo_carat_claim_inflight). The hook is called only without a log or with a full one.
//
// With the shadow (-carat-escape-shadow), an 8-byte aligned slot's escape is one store of the
// value into the slot's shadow word, slot - EXO_CARAT_ABI_SHADOW_SUB: inline assembly, so
// that it is one instruction addressed by the slot's own register (a move that stops the
// thread before it patches that register like the store's; after it, the shadow word is
// in the table's scan). Other slots call the hook, which puts them in the escape sets.
void emitEscape(Runtime &R, Instruction *Before, Value *Slot, Value *Val, Align SlotAlign) {
  IRBuilder<> B(Before);
  if (OptShadow) {
    if (SlotAlign.value() < 8 || !OptInline) {
      B.CreateCall(R.Escape, {Slot, Val});
      return;
    }
    Type *I64 = B.getInt64Ty(), *P = B.getPtrTy();
    FunctionType *FT = FunctionType::get(B.getVoidTy(), {I64, P, I64}, false);
    InlineAsm *Store = InlineAsm::get(FT, "movq $0, ($1,$2)", "r,r,r,~{memory}", true);
    B.CreateCall(FT, Store,
                 {B.CreatePtrToInt(Val, I64), Slot,
                  B.getInt64(-(int64_t)EXO_CARAT_ABI_SHADOW_SUB)});
    return;
  }
  if (!OptInline || !maySplitBefore(Before)) {
    B.CreateCall(R.Escape, {Slot, Val});
    return;
  }
  Type *I64 = B.getInt64Ty(), *P = B.getPtrTy();
  Value *V = B.CreatePtrToInt(Val, I64), *S = B.CreatePtrToInt(Slot, I64);
  Value *Lo = B.CreateLoad(I64, byteGEP(B, R.State, EXO_CARAT_ABI_RUNTIME_LO));
  Value *Hi = B.CreateLoad(I64, byteGEP(B, R.State, EXO_CARAT_ABI_RUNTIME_HI));
  Value *Outside = B.CreateICmpUGT(B.CreateSub(V, Lo), B.CreateSub(Hi, Lo));
  Value *Tls = B.CreateThreadLocalAddress(R.Tls);
  Value *SLo = B.CreateLoad(I64, byteGEP(B, Tls, EXO_CARAT_ABI_TLS_STACK_LO));
  Value *SEnd = B.CreateLoad(I64, byteGEP(B, Tls, EXO_CARAT_ABI_TLS_STACK_END));
  Value *OwnStack = B.CreateICmpULT(B.CreateSub(S, SLo), B.CreateSub(SEnd, SLo));
  Instruction *LogT = SplitBlockAndInsertIfThen(B.CreateNot(B.CreateOr(Outside, OwnStack)),
                                                Before, false);
  IRBuilder<> L(LogT);
  if (!R.Full)
    R.Full = new GlobalVariable(*Before->getModule(), L.getInt32Ty(), true,
                                GlobalValue::PrivateLinkage,
                                L.getInt32(EXO_CARAT_ABI_LOG_CAP), "exomem.carat.log_full");
  Value *T = L.CreateLoad(P, byteGEP(L, Tls, EXO_CARAT_ABI_TLS_THREAD));
  Value *NPtr = L.CreateSelect(L.CreateIsNull(T), R.Full,
                               byteGEP(L, T, EXO_CARAT_ABI_THREAD_N));
  Value *N = L.CreateLoad(L.getInt32Ty(), NPtr);
  Instruction *SlowT, *AppendT;
  SplitBlockAndInsertIfThenElse(
      L.CreateICmpEQ(N, L.getInt32(EXO_CARAT_ABI_LOG_CAP)), LogT, &SlowT, &AppendT,
      MDBuilder(B.getContext()).createBranchWeights(1, 1000));
  IRBuilder<>(SlowT).CreateCall(R.Escape, {Slot, Val});
  IRBuilder<> A(AppendT);
  Value *Entry = A.CreateInBoundsGEP(
      A.getInt8Ty(), T,
      A.CreateMul(A.CreateZExt(N, I64), A.getInt64(EXO_CARAT_ABI_ENTRY_BYTES)));
  // Compiler-only fences (signal fences): the order a signal handler, and so the mover,
  // sees the writes in, with no instruction emitted.
  A.CreateStore(V, byteGEP(A, Entry, EXO_CARAT_ABI_ENTRY_VALUE));
  A.CreateFence(AtomicOrdering::SequentiallyConsistent, SyncScope::SingleThread);
  A.CreateStore(S, byteGEP(A, Entry, EXO_CARAT_ABI_ENTRY_SLOT));
  A.CreateFence(AtomicOrdering::SequentiallyConsistent, SyncScope::SingleThread);
  A.CreateStore(A.CreateAdd(N, A.getInt32(1)), byteGEP(A, T, EXO_CARAT_ABI_THREAD_N));
}

void trackCall(Module &M, Runtime &R, CallBase &CB, const KnownFn &K, TrackCounts &C) {
  Constant *Site = siteString(M, CB);
  switch (K.K) {
  case Kind::Alloc: {
    IRBuilder<> B(afterCall(CB));
    // operator new (every form is mangled _Zn...): its own hook, as the program may have
    // replaced it with an allocator whose blocks free cannot take (src/carat/cxx_new.c).
    bool New = StringRef(K.Name).starts_with("_Zn");
    B.CreateCall(New ? R.AllocNew : R.Alloc, {&CB, sizeOf(B, CB, K.SizeArg), Site});
    C.Allocs++;
    break;
  }
  case Kind::Realloc: {
    // No move may come between realloc's copy and our hearing of it: the runtime defers
    // stops from _begin until the hook (a move waiting on it times out, never breaks).
    // It also keeps other threads from tracking old's memory before the hook forgets old.
    IRBuilder<>(&CB).CreateCall(R.ReallocBegin, {CB.getArgOperand(0)});
    IRBuilder<> B(afterCall(CB));
    B.CreateCall(R.Realloc, {CB.getArgOperand(0), &CB, sizeOf(B, CB, K.SizeArg), Site});
    C.Allocs++;
    break;
  }
  case Kind::Free: {
    IRBuilder<> B(&CB);
    // operator delete (_Zd...): its own hook, paired with operator new's.
    bool Delete = StringRef(K.Name).starts_with("_Zd");
    B.CreateCall(Delete ? R.FreeDelete : R.Free, {CB.getArgOperand(0)});
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
    Before.CreateCall(R.ReallocBegin, {Old});
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

// Does the store's type-based alias tag say that it writes scalars narrower than a pointer
// (clang's "int", "short", "float", "_Bool")? Then no lane of it holds a pointer a move could
// patch: C's aliasing rules, which the optimiser already relies on, let no pointer be
// stored through such an lvalue (a pointer split into two ints is hidden by arithmetic, as
// no move can see). bzip2's sort swaps its int arrays four lanes at a time, and each lane
// called the escape hook. A tag of "omnipotent char" (a byte copy), "long" (uintptr_t) or
// "any pointer", or none (-fno-strict-aliasing, or lanes of different types merged), says
// nothing.
bool storesNarrowScalars(const StoreInst *SI) {
  const MDNode *Tag = SI->getMetadata(LLVMContext::MD_tbaa);
  if (!Tag || Tag->getNumOperands() < 3)   // struct-path tags: (base, access, offset)
    return false;
  const auto *Access = dyn_cast<MDNode>(Tag->getOperand(1));
  if (!Access || Access->getNumOperands() < 1)
    return false;
  const auto *Name = dyn_cast<MDString>(Access->getOperand(0));
  if (!Name)
    return false;
  StringRef N = Name->getString();
  return N == "int" || N == "short" || N == "float" || N == "_Bool";
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

struct StackObject {
  AllocaInst *AI;
  uint64_t Size;
  Constant *Site;
};

// Register the function's escaping stack objects (all static allocas, in the entry block)
// right after the last of them: inline, as exo_carat_hook_stack_alloc does it, when the
// thread's array has room for all of them (carat_abi.h), else with one hook call each.
// oniguruma's match_at registers eleven a call, and calls cost more than the stores.
void registerStackObjects(Runtime &R, Function &F, ArrayRef<StackObject> Objects) {
  // After the entry block's last alloca, registered or not (maySplitBefore).
  Instruction *Last = nullptr;
  for (Instruction &I : F.getEntryBlock())
    if (isa<AllocaInst>(I))
      Last = &I;
  Instruction *At = Last->getNextNode();
  auto Calls = [&](Instruction *Before) {
    IRBuilder<> B(Before);
    for (const StackObject &O : Objects)
      B.CreateCall(R.StackAlloc, {O.AI, B.getInt64(O.Size), O.Site});
  };
  uint64_t K = Objects.size();
  if (!OptInline || K > EXO_CARAT_ABI_STACK_OBJS || !maySplitBefore(At)) {
    Calls(At);
    return;
  }
  IRBuilder<> B(At);
  Value *Tls = B.CreateThreadLocalAddress(R.Tls);
  Value *DepthPtr = byteGEP(B, Tls, EXO_CARAT_ABI_TLS_STACK_DEPTH);
  Value *D = B.CreateLoad(B.getInt32Ty(), DepthPtr);
  Instruction *FastT, *SlowT;
  SplitBlockAndInsertIfThenElse(B.CreateICmpULE(D, B.getInt32(EXO_CARAT_ABI_STACK_OBJS - K)),
                                At, &FastT, &SlowT,
                                MDBuilder(B.getContext()).createBranchWeights(1000, 1));
  Calls(SlowT);
  IRBuilder<> A(FastT);
  Value *Objs = byteGEP(A, Tls, EXO_CARAT_ABI_TLS_STACK_OBJS);
  Value *First = A.CreateInBoundsGEP(
      A.getInt8Ty(), Objs,
      A.CreateMul(A.CreateZExt(D, A.getInt64Ty()), A.getInt64(EXO_CARAT_ABI_STACK_OBJ_BYTES)));
  for (uint64_t I = 0; I < K; I++) {
    Value *Obj = byteGEP(A, First, I * EXO_CARAT_ABI_STACK_OBJ_BYTES);
    A.CreateStore(Objects[I].AI, byteGEP(A, Obj, EXO_CARAT_ABI_STACK_OBJ_BASE));
    A.CreateStore(A.getInt64(Objects[I].Size ? Objects[I].Size : 1),
                  byteGEP(A, Obj, EXO_CARAT_ABI_STACK_OBJ_SIZE));
    A.CreateStore(Objects[I].Site, byteGEP(A, Obj, EXO_CARAT_ABI_STACK_OBJ_SITE));
  }
  A.CreateStore(A.CreateAdd(D, A.getInt32(K)), DepthPtr);
}

// Before the return at RI, release the K objects the function registered: inline in the
// common case, where they are the top K of the thread's array and the one below them is
// a caller's (exo_carat_hook_stack_release pops every object below the frame's return
// address, those of deeper frames a longjmp left too), and the thread has its record
// (which exo_carat_get_stats reads the count through). Otherwise the hook.
void releaseStackObjects(Runtime &R, ReturnInst *RI, uint64_t K) {
  IRBuilder<> B(RI);
  Value *FrameEnd = B.CreateIntrinsic(Intrinsic::addressofreturnaddress, {B.getPtrTy()}, {});
  auto Call = [&](Instruction *Before) {
    IRBuilder<>(Before).CreateCall(R.StackRelease, {FrameEnd, B.getInt64(K)});
  };
  if (!OptInline) {
    Call(RI);
    return;
  }
  Type *I32 = B.getInt32Ty(), *I64 = B.getInt64Ty();
  Value *Tls = B.CreateThreadLocalAddress(R.Tls);
  Value *DepthPtr = byteGEP(B, Tls, EXO_CARAT_ABI_TLS_STACK_DEPTH);
  Value *D = B.CreateLoad(I32, DepthPtr);
  Value *Top = B.CreateSub(D, B.getInt32(K));   // the first of ours, if all are recorded
  Value *Recorded = B.CreateICmpULE(Top, B.getInt32(EXO_CARAT_ABI_STACK_OBJS - K));
  Value *HasRecord =
      B.CreateIsNotNull(B.CreateLoad(B.getPtrTy(), byteGEP(B, Tls, EXO_CARAT_ABI_TLS_THREAD)));
  Instruction *CheckT, *SlowT;
  SplitBlockAndInsertIfThenElse(B.CreateAnd(Recorded, HasRecord), RI, &CheckT, &SlowT,
                                MDBuilder(B.getContext()).createBranchWeights(1000, 1));
  Call(SlowT);
  IRBuilder<> C(CheckT);
  Value *Objs = byteGEP(C, Tls, EXO_CARAT_ABI_TLS_STACK_OBJS);
  auto BaseAt = [&](Value *Index) {
    Value *Obj = C.CreateInBoundsGEP(
        C.getInt8Ty(), Objs,
        C.CreateMul(C.CreateZExt(Index, I64), C.getInt64(EXO_CARAT_ABI_STACK_OBJ_BYTES)));
    return C.CreateLoad(I64, byteGEP(C, Obj, EXO_CARAT_ABI_STACK_OBJ_BASE));
  };
  Value *End = C.CreatePtrToInt(FrameEnd, I64);
  Value *Ours = C.CreateICmpULT(BaseAt(Top), End);
  // The one below ours (none when Top is 0: index 0 is read again, and ignored).
  Value *NoneBelow = C.CreateICmpEQ(Top, C.getInt32(0));
  Value *Below = BaseAt(C.CreateSelect(NoneBelow, Top, C.CreateSub(Top, C.getInt32(1))));
  Value *Callers = C.CreateOr(NoneBelow, C.CreateICmpUGE(Below, End));
  Instruction *FastT, *Slow2T;
  SplitBlockAndInsertIfThenElse(C.CreateAnd(Ours, Callers), CheckT, &FastT, &Slow2T,
                                MDBuilder(B.getContext()).createBranchWeights(1000, 1));
  Call(Slow2T);
  IRBuilder<> A(FastT);
  A.CreateStore(Top, DepthPtr);
  Value *ReleasedPtr = byteGEP(A, Tls, EXO_CARAT_ABI_TLS_STACK_RELEASED);
  A.CreateStore(A.CreateAdd(A.CreateLoad(I64, ReleasedPtr), A.getInt64(K)), ReleasedPtr);
}

// Is V a constant C string with a %p conversion? A pointer printed with it becomes text
// that no move can patch (SQLite's testfixture hands its statements to Tcl so).
bool formatsPointer(Value *V) {
  auto *GV = dyn_cast<GlobalVariable>(V->stripPointerCasts());
  if (!GV || !GV->isConstant() || !GV->hasDefinitiveInitializer())
    return false;
  auto *Text = dyn_cast<ConstantDataArray>(GV->getInitializer());
  if (!Text || !Text->isCString())
    return false;
  StringRef S = Text->getAsCString();
  for (size_t I = S.find('%'); I != StringRef::npos; I = S.find('%', I)) {
    size_t J = S.find_first_not_of("-+ #0123456789.*'hlLqjzt", I + 1);
    if (J == StringRef::npos)
      return false;
    if (S[J] == 'p')
      return true;
    I = J + 1;   // past the conversion ("%%" too)
  }
  return false;
}

// A variadic call whose constant format prints a pointer (%p): every pointer among its
// variadic arguments is pinned first, whichever of them the %p takes.
void pinFormatted(Runtime &R, CallBase &CB, TrackCounts &C) {
  if (!CB.getFunctionType()->isVarArg() ||
      none_of(CB.args(), [](Value *A) { return formatsPointer(A); }))
    return;
  for (unsigned I = CB.getFunctionType()->getNumParams(); I < CB.arg_size(); I++) {
    Value *A = CB.getArgOperand(I);
    if (A->getType()->isPointerTy() && mayPointIntoHeap(A)) {
      IRBuilder<>(&CB).CreateCall(R.Pin, {A});
      C.Pins++;
    }
  }
}

void trackFunction(Module &M, Runtime &R, Function &F, bool Allocs, bool Escapes,
                   TrackCounts &C) {
  const DataLayout &DL = M.getDataLayout();
  SmallPtrSet<AllocaInst *, 16> EscapingAllocas;
  SmallVector<AllocaInst *, 16> Allocas;
  SmallVector<std::pair<CallBase *, const KnownFn *>, 16> Calls;
  SmallVector<StoreInst *, 32> Stores;
  SmallVector<MemTransferInst *, 8> Copies;
  SmallVector<CallBase *, 8> CopyCalls, RearrangeCalls, VarArgCalls;
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
        else if (CB->getFunctionType()->isVarArg())
          VarArgCalls.push_back(CB);
      } else if (auto *SI = dyn_cast<StoreInst>(&I)) {
        Stores.push_back(SI);
      } else if (auto *RI = dyn_cast<ReturnInst>(&I)) {
        Returns.push_back(RI);
      }
    }
  if (Allocs) {
    for (auto &[CB, K] : Calls)
      trackCall(M, R, *CB, *K, C);
    SmallVector<StackObject, 16> Objects;
    for (AllocaInst *AI : Allocas) {
      if (!EscapingAllocas.count(AI))
        continue;
      std::optional<TypeSize> Size = AI->getAllocationSize(DL);
      if (!Size || Size->isScalable())
        continue;
      Objects.push_back({AI, Size->getFixedValue(), siteString(M, *AI)});
      C.StackObjects++;
    }
    uint64_t Registered = Objects.size();
    if (Registered)
      registerStackObjects(R, F, Objects);
    // One release per return for all of them: the frame's objects lie below the slot of
    // its return address, its callers' above (oniguruma's match_at made eleven calls more
    // per call of it, one per object).
    if (Registered)
      for (ReturnInst *RI : Returns)
        releaseStackObjects(R, RI, Registered);
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
        emitEscape(R, SI, SI->getPointerOperand(), B.CreatePointerCast(P, B.getPtrTy()),
                   SI->getAlign());
        C.Escapes++;
      } else if (auto *VT = dyn_cast<FixedVectorType>(V->getType());
                 VT && VT->getElementType()->isPointerTy()) {
        // A vector of pointers (two pointers stored at once by the SLP vectoriser).
        for (unsigned L = 0; L < VT->getNumElements(); L++) {
          IRBuilder<> BL(SI);   // emitEscape splits SI's block: a fresh builder each time
          Value *Slot = BL.CreateConstInBoundsGEP1_64(BL.getInt8Ty(), SI->getPointerOperand(),
                                                      8 * L);
          emitEscape(R, SI, Slot, BL.CreateExtractElement(V, BL.getInt64(L)), SI->getAlign());
        }
        C.Escapes++;
      } else if (mayCarryPointer(V, DL) && !storesNarrowScalars(SI)) {
        // Memory copied as integers or vectors (a struct copy after SROA): each 8-byte lane
        // may be a pointer; the runtime keeps the ones that point into an allocation.
        unsigned Lanes = DL.getTypeStoreSize(V->getType()).getFixedValue() / 8;
        Value *AsLanes = B.CreateBitCast(V, FixedVectorType::get(B.getInt64Ty(), Lanes));
        for (unsigned L = 0; L < Lanes; L++) {
          IRBuilder<> BL(SI);
          Value *Slot = BL.CreateConstInBoundsGEP1_64(BL.getInt8Ty(), SI->getPointerOperand(),
                                                      8 * L);
          Value *Lane = BL.CreateExtractElement(AsLanes, BL.getInt64(L));
          emitEscape(R, SI, Slot, BL.CreateIntToPtr(Lane, BL.getPtrTy()), SI->getAlign());
        }
        C.Copies++;
      }
    }
    for (CallBase *CB : VarArgCalls)
      pinFormatted(R, *CB, C);
    // qsort: no move while it runs (the bracket realloc uses), and its slots told again after.
    for (CallBase *CB : RearrangeCalls) {
      Instruction *After = afterCall(*CB);
      IRBuilder<>(CB).CreateCall(R.ReallocBegin,
                                 {ConstantPointerNull::get(PointerType::getUnqual(CB->getContext()))});
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
  // The shadow is reserved before any of the module's code runs: its constructors come
  // after this one (priority 0, the first).
  if (Escapes && OptShadow) {
    LLVMContext &Ctx = M.getContext();
    Function *Ctor = Function::Create(FunctionType::get(Type::getVoidTy(Ctx), false),
                                      GlobalValue::InternalLinkage, "exomem.carat.shadow", M);
    IRBuilder<> B(BasicBlock::Create(Ctx, "entry", Ctor));
    B.CreateCall(R.ShadowInit, {});
    B.CreateRetVoid();
    appendToGlobalCtors(M, Ctor, 0);
  }
  return true;
}
