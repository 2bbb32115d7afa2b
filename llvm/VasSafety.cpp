// SpaceJMP's VAS safety (section 4.3 of the SpaceJMP paper), within one function: a pointer
// into a segment is valid only while the address space it came from is current. The pass
// follows which VAS is current (a vas_switch(h) makes h current; a call changes it as the
// callee's summary says; a call it cannot read makes it unknown) and which VAS each pointer
// belongs to (what seg_malloc or vas_malloc returned, pointers loaded from memory while a
// VAS other than home was current, what a call returns as its summary says, and pointer
// arguments as all call sites agree; derived pointers inherit it; vcast(p) says "trust me"
// and frees p of it). A dereference is proven safe when its pointer's VAS is the current
// one there; otherwise a run-time check (exo_vas_deref_check) goes before it, and a
// dereference where another VAS is known to be current is reported at compile time.
//
// The module-level part (VasSummary.cpp) runs this analysis bottom-up over the call graph
// for the functions' summaries, then top-down to instrument and hand call-site facts to
// internal functions. What it does not see: switches in functions it cannot read (indirect
// calls, other translation units: the current VAS becomes unknown), and a vas_switch that
// fails (the program checks its result).
#include "VasSafety.h"

#include "llvm/ADT/PostOrderIterator.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

using namespace llvm;
using namespace exomem_carat;
using namespace exomem_carat::vas;

namespace {

// The VAS current at a point: a term (VasSafety.h), or unknown (nullptr).
struct State {
  bool Reached = false;
  Value *Current = nullptr;
  bool operator!=(const State &O) const {
    return Reached != O.Reached || Current != O.Current;
  }
};

StringRef calleeName(const CallBase &CB) {
  const Function *F = CB.getCalledFunction();
  return F ? F->getName() : StringRef();
}

// The calls whose result lies in the segment heap of the current VAS.
bool isSegmentAllocation(StringRef N) {
  return N == "seg_malloc" || N == "seg_calloc" || N == "seg_memalign" ||
         N == "seg_realloc" || N == "vas_malloc" || N == "vas_calloc";
}

bool isHome(const Value *X) {
  auto *K = dyn_cast_or_null<ConstantInt>(X);   // VAS_HOME is 0
  return K && K->isZero();
}

// A VAS named by a constant or a variable: two different names are taken for two different
// VASes (a program keeps different attachments in different variables). An argument, an
// entry VAS or a computed handle may be any of them.
bool isNamed(const Value *X) {
  return X && (isa<ConstantInt>(X) || isa<GlobalVariable>(X) || isa<AllocaInst>(X));
}

// The one value ever stored into a local variable that is otherwise only loaded (a handle
// kept in a variable at -O0), or null.
Value *onlyStoredValue(AllocaInst *A) {
  Value *Stored = nullptr;
  for (User *U : A->users()) {
    if (auto *SI = dyn_cast<StoreInst>(U)) {
      if (SI->getValueOperand() == A || (Stored && Stored != SI->getValueOperand()))
        return nullptr;
      Stored = SI->getValueOperand();
    } else if (auto *II = dyn_cast<IntrinsicInst>(U)) {
      if (!II->isLifetimeStartOrEnd() && !isa<DbgInfoIntrinsic>(II))
        return nullptr;
    } else if (!isa<LoadInst>(U)) {
      return nullptr;
    }
  }
  return Stored;
}

std::string where(const Instruction &I) {
  if (const DebugLoc &DL = I.getDebugLoc())
    return (DL->getFilename() + ":" + Twine(DL.getLine())).str();
  return I.getFunction()->getName().str();
}

class FunctionSafety {
public:
  FunctionSafety(Function &Fn, const ModuleFacts &Facts, const EntryFacts *Entry)
      : F(Fn), M(*Fn.getParent()), MF(Facts), EntryVas(&Fn) {
    if (Entry && Entry->Current)
      EntryVas = Entry->Current;
    for (unsigned I = 0; Entry && I < Entry->Args.size() && I < F.arg_size(); I++) {
      const PtrFact &A = Entry->Args[I];
      Value *Vas = A.Term == &F ? EntryVas : A.Term;   // of the entry VAS, maybe known
      if (A.K == PtrFact::Vas || A.K == PtrFact::Trusted)
        Bound[F.getArg(I)] = {A.K == PtrFact::Vas ? Vas : nullptr, nullptr, I};
    }
  }

  void solve();
  void bind(ModuleFacts *Record);
  Summary summarise();
  bool check(VasCounts &C);

private:
  Function &F;
  Module &M;
  const ModuleFacts &MF;
  Value *EntryVas;                             // the VAS current at entry
  std::map<BasicBlock *, State> In;
  std::map<const CallBase *, Value *> CurrentAt;  // what a vas_current() call returned
  // A pointer's VAS (null: vouched for by vcast) and where it was made, for the report
  // (null: it is argument Arg).
  struct Binding {
    Value *Vas;
    Instruction *Born;
    unsigned Arg = 0;
  };
  std::map<Value *, Binding> Bound;
  Value *EntryHandle = nullptr;                // vas_current() at entry, once a check needs it

  Value *identity(Value *H, int Depth = 0);
  bool maySwitch(const CallBase &CB) const;
  void apply(const CallBase &CB, State &S);
  Value *fromCallee(Value *Term, const CallBase &CB, Value *Before);
  Value *toCallee(Value *Term, const CallBase &CB, Function &Callee);
  EntryFacts siteFacts(const CallBase &CB, const State &S, Function &Callee);
  void bindCall(CallBase &CB, const State &S, ModuleFacts *Record);
  Value *ownTerm(Value *X) const;
  PtrFact returned(Value *V);
  Value *handle(IRBuilder<> &B, Value *Vas);
  void flow();

  // Visit BB's instructions, each with the state before it, while the block is reached.
  template <typename Visit> State walk(BasicBlock &BB, Visit V) {
    State S = In[&BB];
    for (Instruction &I : BB) {
      if (!S.Reached)
        break;
      V(I, S);
      if (auto *CB = dyn_cast<CallBase>(&I))
        apply(*CB, S);
    }
    return S;
  }

  // The pointer p was derived from (through GEPs and casts).
  static Value *root(Value *P) {
    for (int Depth = 0; Depth < 16; Depth++) {
      if (auto *GEP = dyn_cast<GetElementPtrInst>(P))
        P = GEP->getPointerOperand();
      else if (auto *Cast = dyn_cast<CastInst>(P))
        P = Cast->getOperand(0);
      else
        break;
    }
    return P;
  }

  // The binding of p, or of the pointer it was derived from (through GEPs and casts, and
  // phis and selects whose inputs all agree, NULL aside), or null.
  const Binding *origin(Value *P) {
    std::set<Value *> Visiting;
    unsigned Budget = 64;
    const Binding *B = originOf(P, Visiting, Budget);
    return B == &Neutral ? nullptr : B;
  }
  Binding Neutral{nullptr, nullptr};   // agrees with anything: NULL, or a cycle of phis
  const Binding *originOf(Value *P, std::set<Value *> &Visiting, unsigned &Budget);
};

const FunctionSafety::Binding *
FunctionSafety::originOf(Value *P, std::set<Value *> &Visiting, unsigned &Budget) {
  for (; Budget > 0; Budget--) {
    auto It = Bound.find(P);
    if (It != Bound.end())
      return &It->second;
    if (auto *GEP = dyn_cast<GetElementPtrInst>(P)) {
      P = GEP->getPointerOperand();
      continue;
    }
    if (auto *Cast = dyn_cast<CastInst>(P)) {
      P = Cast->getOperand(0);
      continue;
    }
    if (auto *LI = dyn_cast<LoadInst>(P)) {   // a pointer kept in a local variable (-O0)
      auto *Slot = dyn_cast<AllocaInst>(LI->getPointerOperand()->stripPointerCasts());
      Value *Stored = Slot ? onlyStoredValue(Slot) : nullptr;
      if (!Stored)
        return nullptr;
      P = Stored;
      continue;
    }
    if (isa<ConstantPointerNull>(P))
      return &Neutral;
    SmallVector<Value *, 4> Inputs;
    if (auto *Phi = dyn_cast<PHINode>(P))
      Inputs.append(Phi->incoming_values().begin(), Phi->incoming_values().end());
    else if (auto *Sel = dyn_cast<SelectInst>(P))
      Inputs = {Sel->getTrueValue(), Sel->getFalseValue()};
    else
      return nullptr;
    if (!Visiting.insert(P).second)
      return &Neutral;   // around a cycle: what comes in from outside it decides
    const Binding *Agreed = &Neutral;
    bool WithNull = false;
    for (Value *In : Inputs) {
      WithNull |= isa<ConstantPointerNull>(In);
      const Binding *B = originOf(In, Visiting, Budget);
      if (!B || (B != &Neutral && Agreed != &Neutral && B->Vas != Agreed->Vas))
        return nullptr;
      if (Agreed == &Neutral)
        Agreed = B;
    }
    // A handle computed on the way to one input is not there on the NULL input's path:
    // the check could not name it.
    if (WithNull && Agreed != &Neutral && isa_and_nonnull<Instruction>(Agreed->Vas) &&
        !isa<AllocaInst>(Agreed->Vas))
      return nullptr;
    return Agreed;
  }
  return nullptr;
}

// Which VAS a handle value names: a handle kept in a variable is read afresh before each
// use (one load per vas_switch), so the variable itself stands for the VAS; what
// vas_current() returned is the VAS current there, when that is known.
Value *FunctionSafety::identity(Value *H, int Depth) {
  if (auto *CB = dyn_cast<CallBase>(H)) {
    auto It = CurrentAt.find(CB);
    return It != CurrentAt.end() ? It->second : H;
  }
  if (auto *LI = dyn_cast<LoadInst>(H)) {
    Value *Slot = LI->getPointerOperand()->stripPointerCasts();
    if (auto *A = dyn_cast<AllocaInst>(Slot)) {
      Value *Stored = Depth < 8 ? onlyStoredValue(A) : nullptr;
      return Stored ? identity(Stored, Depth + 1) : A;
    }
    if (isa<GlobalVariable>(Slot))
      return Slot;
  }
  return H;
}

bool FunctionSafety::maySwitch(const CallBase &CB) const {
  const Function *Callee = CB.getCalledFunction();
  if (!Callee)
    return !CB.isInlineAsm();
  if (Callee->isIntrinsic() || knownNotToSwitch(*Callee))
    return false;
  const Summary *Sum = MF.summary(Callee);
  return !Sum || Sum->MaySwitch;
}

// How a call changes the current VAS.
void FunctionSafety::apply(const CallBase &CB, State &S) {
  if (!S.Reached)
    return;
  StringRef N = calleeName(CB);
  if (N == "vas_switch") {
    S.Current = identity(CB.getArgOperand(0));
    return;
  }
  const Summary *Sum = MF.summary(CB.getCalledFunction());
  if (Sum && !Sum->Returns) {   // never returns (or not known to yet, within a recursion)
    S.Reached = false;
    return;
  }
  if (!maySwitch(CB))
    return;
  S.Current = Sum ? fromCallee(Sum->Exit, CB, S.Current) : nullptr;
}

// A callee's term as the caller names it at call CB (Before: the VAS current at the call).
Value *FunctionSafety::fromCallee(Value *Term, const CallBase &CB, Value *Before) {
  if (!Term)
    return nullptr;
  if (Term == CB.getCalledFunction())   // the callee's entry VAS: the one current at the call
    return Before;
  if (auto *A = dyn_cast<Argument>(Term))
    return A->getArgNo() < CB.arg_size() ? identity(CB.getArgOperand(A->getArgNo()))
                                          : nullptr;
  return Term;   // a constant or a global
}

// The caller's term as Callee names it at call CB (a constant, a global, or the handle
// passed as an argument), or null.
Value *FunctionSafety::toCallee(Value *Term, const CallBase &CB, Function &Callee) {
  if (!Term)
    return nullptr;
  if (isa<ConstantInt>(Term) || isa<GlobalVariable>(Term))
    return Term;
  for (unsigned I = 0; I < CB.arg_size() && I < Callee.arg_size(); I++)
    if (CB.getArgOperand(I)->getType()->isIntegerTy() &&
        identity(CB.getArgOperand(I)) == Term)
      return Callee.getArg(I);
  return nullptr;
}

// What call CB says about Callee's entry. A pointer of the VAS current at the call is
// given as "of the entry VAS" (Callee itself), which holds at every such call site.
EntryFacts FunctionSafety::siteFacts(const CallBase &CB, const State &S, Function &Callee) {
  EntryFacts E;
  E.Current = toCallee(S.Current, CB, Callee);
  E.Args.assign(Callee.arg_size(), PtrFact{PtrFact::Unknown});
  for (unsigned I = 0; I < CB.arg_size() && I < Callee.arg_size(); I++) {
    Value *A = CB.getArgOperand(I);
    const Binding *B = A->getType()->isPointerTy() ? origin(A) : nullptr;
    if (!B)
      continue;
    if (!B->Vas)
      E.Args[I] = PtrFact{PtrFact::Trusted};
    else if (S.Current && B->Vas == S.Current)
      E.Args[I] = PtrFact{PtrFact::Vas, &Callee};
    else if (Value *T = toCallee(B->Vas, CB, Callee))
      E.Args[I] = PtrFact{PtrFact::Vas, T};
  }
  return E;
}

// A term that means something to callers: F's entry VAS, an argument, a constant, a global.
Value *FunctionSafety::ownTerm(Value *X) const {
  if (!X)
    return nullptr;
  if (X == &F || isa<ConstantInt>(X) || isa<GlobalVariable>(X))
    return X;
  auto *A = dyn_cast<Argument>(X);
  return A && A->getParent() == &F ? X : nullptr;
}

// The current VAS at each block's entry: a forward data flow, in rounds, since the handles
// vas_current() returns are resolved from the states (each round is sound on its own).
void FunctionSafety::solve() {
  for (int Round = 0;; Round++) {
    In.clear();
    flow();
    if (Round == 2)
      break;
    std::map<const CallBase *, Value *> Now;
    for (BasicBlock &BB : F)
      walk(BB, [&](Instruction &I, State &S) {
        auto *CB = dyn_cast<CallBase>(&I);
        if (CB && calleeName(*CB) == "vas_current" && S.Current)
          Now[CB] = S.Current;
      });
    if (Now == CurrentAt)
      break;
    CurrentAt = std::move(Now);
  }
}

void FunctionSafety::flow() {
  SmallVector<BasicBlock *, 16> Work;
  In[&F.getEntryBlock()] = State{true, EntryVas};
  Work.push_back(&F.getEntryBlock());
  while (!Work.empty()) {
    BasicBlock *BB = Work.pop_back_val();
    State S = walk(*BB, [](Instruction &, State &) {});
    auto *Invoke = dyn_cast<InvokeInst>(BB->getTerminator());
    for (BasicBlock *Succ : successors(BB)) {
      State Out = S;
      if (Invoke && Succ == Invoke->getUnwindDest())
        Out = State{true, nullptr};   // the callee may have switched before it threw
      if (!Out.Reached)
        continue;
      State &T = In[Succ];
      State Merged = T.Reached ? State{true, T.Current == Out.Current ? Out.Current : nullptr}
                               : Out;
      if (Merged != T) {
        T = Merged;
        Work.push_back(Succ);
      }
    }
  }
}

// Record which pointers belong to which VAS (blocks in reverse post-order, so a value's
// binding is known before its uses; values flowing through phis are not followed), and,
// with Record, what each call site says about the internal functions it calls.
void FunctionSafety::bind(ModuleFacts *Record) {
  ReversePostOrderTraversal<Function *> RPOT(&F);
  for (BasicBlock *BB : RPOT)
    walk(*BB, [&](Instruction &I, State &S) {
      if (auto *CB = dyn_cast<CallBase>(&I)) {
        bindCall(*CB, S, Record);
      } else if (auto *LI = dyn_cast<LoadInst>(&I)) {
        // A pointer read from memory while a known VAS other than home is current belongs
        // to it (at home, or in an entry VAS that may be home, memory holds pointers to the
        // common region: stack, globals, the process heap). One read from the stack is
        // what was stored there (origin), whatever VAS is current.
        bool FromStack = isa<AllocaInst>(LI->getPointerOperand()->stripPointerCasts());
        if (LI->getType()->isPointerTy() && !FromStack && S.Current &&
            !isa<Function>(S.Current) && !isHome(S.Current))
          Bound[LI] = {S.Current, LI};
      }
    });
}

void FunctionSafety::bindCall(CallBase &CB, const State &S, ModuleFacts *Record) {
  StringRef N = calleeName(CB);
  Function *Callee = CB.getCalledFunction();
  if (isSegmentAllocation(N)) {
    if (S.Current)
      Bound[&CB] = {S.Current, &CB};
  } else if (N == "vas_cast") {
    Bound[&CB] = {nullptr, &CB};
  } else if (const Summary *Sum = MF.summary(Callee)) {
    const PtrFact &R = Sum->Ret;
    if (R.K == PtrFact::Trusted) {
      Bound[&CB] = {nullptr, &CB};
    } else if (R.K == PtrFact::Vas) {
      if (Value *V = fromCallee(R.Term, CB, S.Current))
        Bound[&CB] = {V, &CB};
    } else if (R.K == PtrFact::SameAsArg && R.Arg < CB.arg_size()) {
      if (const Binding *B = origin(CB.getArgOperand(R.Arg)))
        Bound[&CB] = *B;
    }
  }
  if (Record && Callee && Record->takesFacts(Callee))
    Record->Entry[Callee].merge(siteFacts(CB, S, *Callee));
}

// What F says about a pointer it returns.
PtrFact FunctionSafety::returned(Value *V) {
  if (const Binding *B = origin(V)) {
    if (!B->Vas)
      return PtrFact{PtrFact::Trusted};
    Value *T = ownTerm(B->Vas);
    return T ? PtrFact{PtrFact::Vas, T} : PtrFact{PtrFact::Unknown};
  }
  if (isa<ConstantPointerNull>(V))
    return PtrFact{PtrFact::None};   // NULL (a failure) goes with any VAS
  if (auto *A = dyn_cast<Argument>(root(V)))
    return PtrFact{PtrFact::SameAsArg, nullptr, A->getArgNo()};
  return PtrFact{PtrFact::Unknown};
}

// F's summary (after solve and bind, with its entry VAS as F itself).
Summary FunctionSafety::summarise() {
  Summary Sum;
  for (BasicBlock &BB : F) {
    State End = walk(BB, [&](Instruction &I, State &) {
      auto *CB = dyn_cast<CallBase>(&I);
      if (CB && maySwitch(*CB))
        Sum.MaySwitch = true;
    });
    auto *Ret = dyn_cast<ReturnInst>(BB.getTerminator());
    if (!Ret || !End.Reached)
      continue;
    Value *Exit = ownTerm(End.Current);
    Sum.Exit = Sum.Returns && Sum.Exit != Exit ? nullptr : Exit;
    Sum.Returns = true;
    if (Value *V = Ret->getReturnValue(); V && V->getType()->isPointerTy())
      Sum.Ret.merge(returned(V));
  }
  return Sum;
}

// The handle a check compares with the current one, for a pointer of VAS Vas.
Value *FunctionSafety::handle(IRBuilder<> &B, Value *Vas) {
  if (Vas == &F) {   // the entry VAS: what vas_current() said at entry
    if (!EntryHandle) {
      BasicBlock::iterator At = F.getEntryBlock().getFirstInsertionPt();
      while (isa<AllocaInst>(*At))
        ++At;
      IRBuilder<> E(&*At);
      FunctionCallee Cur = M.getOrInsertFunction("vas_current", E.getInt32Ty());
      EntryHandle = E.CreateCall(Cur, {}, "vas.entry");
    }
    return EntryHandle;
  }
  return Vas->getType()->isPointerTy() ? B.CreateLoad(B.getInt32Ty(), Vas) : Vas;
}

bool FunctionSafety::check(VasCounts &C) {
  FunctionCallee Check = M.getOrInsertFunction(
      "exo_vas_deref_check", Type::getVoidTy(M.getContext()),
      Type::getInt32Ty(M.getContext()), PointerType::getUnqual(M.getContext()));
  bool Changed = false;
  for (BasicBlock &BB : F) {
    SmallVector<std::pair<Instruction *, Value *>, 8> Todo;
    walk(BB, [&](Instruction &I, State &S) {
      Value *Ptr = nullptr;
      if (auto *LI = dyn_cast<LoadInst>(&I))
        Ptr = LI->getPointerOperand();
      else if (auto *SI = dyn_cast<StoreInst>(&I))
        Ptr = SI->getPointerOperand();
      const Binding *B = Ptr ? origin(Ptr) : nullptr;
      Value *V = B ? B->Vas : nullptr;
      if (!V)
        return;
      C.Derefs++;
      if (S.Current == V) {
        C.ProvenSafe++;
        return;
      }
      Todo.push_back({&I, V});
      if (isNamed(S.Current) && isNamed(V)) {   // another VAS is current here: certainly wrong
        C.Unsafe++;
        errs() << where(I) << ": warning: exomem VAS safety: dereference of ";
        if (B->Born)
          errs() << "a pointer into the VAS switched in before " << where(*B->Born);
        else
          errs() << "argument " << B->Arg + 1 << " of " << F.getName()
                 << ", a pointer into the VAS its call sites give";
        errs() << ", while another VAS is current (checked at run time)\n";
      }
    });
    for (auto &[I, V] : Todo) {
      IRBuilder<> B(I);
      Value *Handle = handle(B, V);
      B.CreateCall(Check, {B.CreateZExtOrTrunc(Handle, B.getInt32Ty()), siteString(M, *I)});
      C.Checked++;
      Changed = true;
    }
  }
  return Changed;
}

} // namespace

Summary vas::summarise(Function &F, const ModuleFacts &MF) {
  FunctionSafety S(F, MF, nullptr);
  S.solve();
  S.bind(nullptr);
  return S.summarise();
}

bool vas::instrument(Function &F, ModuleFacts &MF, VasCounts &Counts) {
  auto It = MF.Entry.find(&F);
  const EntryFacts *Facts = It != MF.Entry.end() && It->second.Sites ? &It->second : nullptr;
  FunctionSafety S(F, MF, Facts);
  S.solve();
  S.bind(&MF);
  return !isRuntimeFunction(F) && S.check(Counts);
}
