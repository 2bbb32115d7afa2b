// SpaceJMP's VAS safety (section 4.3 of the SpaceJMP paper): a pointer into a segment is
// valid only while the address space it came from is current. Within each function this
// pass follows which VAS is current (a vas_switch(h) makes h current; a call that may
// switch makes it unknown) and which VAS each pointer belongs to (what seg_malloc or
// vas_malloc returned, and pointers loaded from memory, while a VAS other than home was
// current; derived pointers inherit it; vcast(p) says "trust me" and frees p of it). A
// dereference is proven safe when its pointer's VAS is the current one there; otherwise a
// run-time check (exo_vas_deref_check) goes before it, and a dereference where another VAS
// is known to be current is reported at compile time as unsafe.
//
// What it does not see: switches in called functions it cannot read (they make the current
// VAS unknown, so the check stays), pointers passed in from callers (trusted), and a
// vas_switch that fails (the program checks its result).
#include "Carat.h"

#include "llvm/IR/CFG.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace llvm;
using namespace exomem_carat;

namespace {

// The VAS current at a point: a handle value, or unknown (nullptr).
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

bool mayCallSwitch(const Function &F) {
  for (const BasicBlock &BB : F)
    for (const Instruction &I : BB)
      if (auto *CB = dyn_cast<CallBase>(&I)) {
        StringRef N = calleeName(*CB);
        if (N == "vas_switch" || N == "vas_try_switch" || (!CB->getCalledFunction() &&
                                                             !CB->isInlineAsm()))
          return true;
      }
  return false;
}

// Which VAS a handle value names: a handle kept in a variable is read afresh before each
// use (one load per vas_switch), so the variable itself stands for the VAS.
Value *vasIdentity(Value *H) {
  if (auto *LI = dyn_cast<LoadInst>(H)) {
    Value *Slot = LI->getPointerOperand()->stripPointerCasts();
    if (isa<AllocaInst>(Slot) || isa<GlobalVariable>(Slot))
      return Slot;
  }
  return H;
}

// How a call changes the current VAS. Switching: the functions of the module that may
// switch (found once per module).
Value *afterCall(const CallBase &CB, Value *Cur,
                 const SmallPtrSetImpl<const Function *> &Switching) {
  StringRef N = calleeName(CB);
  if (N == "vas_switch")
    return vasIdentity(CB.getArgOperand(0));
  if (N == "vas_try_switch")
    return nullptr;   // may or may not have switched
  const Function *F = CB.getCalledFunction();
  if (!F)
    return CB.isInlineAsm() ? Cur : nullptr;
  return Switching.count(F) ? nullptr : Cur;   // library functions are assumed not to switch
}

std::string where(const Instruction &I) {
  if (const DebugLoc &DL = I.getDebugLoc())
    return (DL->getFilename() + ":" + Twine(DL.getLine())).str();
  return I.getFunction()->getName().str();
}

struct FunctionSafety {
  Function &F;
  Module &M;
  VasCounts &C;
  const SmallPtrSetImpl<const Function *> &Switching;
  std::map<BasicBlock *, State> In;
  // A pointer's VAS (null: vouched for by vcast) and where it was made, for the report.
  struct Binding {
    Value *Vas;
    Instruction *Born;
  };
  std::map<Value *, Binding> Bound;

  FunctionSafety(Function &Fn, VasCounts &Counts,
                 const SmallPtrSetImpl<const Function *> &Sw)
      : F(Fn), M(*Fn.getParent()), C(Counts), Switching(Sw) {}

  // The binding of p, or of the pointer it was derived from (GEPs and casts), or null.
  const Binding *origin(Value *P) {
    for (int Depth = 0; Depth < 16 && P; Depth++) {
      auto It = Bound.find(P);
      if (It != Bound.end())
        return &It->second;
      if (auto *GEP = dyn_cast<GetElementPtrInst>(P))
        P = GEP->getPointerOperand();
      else if (auto *Cast = dyn_cast<CastInst>(P))
        P = Cast->getOperand(0);
      else
        return nullptr;
    }
    return nullptr;
  }

  void solve() {
    SmallVector<BasicBlock *, 16> Work;
    In[&F.getEntryBlock()] = State{true, nullptr};
    Work.push_back(&F.getEntryBlock());
    while (!Work.empty()) {
      BasicBlock *BB = Work.pop_back_val();
      State S = In[BB];
      for (Instruction &I : *BB)
        if (auto *CB = dyn_cast<CallBase>(&I))
          S.Current = afterCall(*CB, S.Current, Switching);
      for (BasicBlock *Succ : successors(BB)) {
        State &T = In[Succ];
        State Merged = T.Reached ? State{true, T.Current == S.Current ? S.Current : nullptr}
                                 : S;
        if (Merged != T) {
          T = Merged;
          Work.push_back(Succ);
        }
      }
    }
  }

  // Record which pointers belong to which VAS (in program order within each block; values
  // flowing through phis keep a binding only when every input has the same one).
  void bind() {
    for (BasicBlock &BB : F) {
      State S = In[&BB];
      for (Instruction &I : BB) {
        if (auto *CB = dyn_cast<CallBase>(&I)) {
          StringRef N = calleeName(*CB);
          if ((N == "seg_malloc" || N == "vas_malloc" || N == "seg_calloc" ||
               N == "seg_realloc") && S.Current) {
            Bound[CB] = {S.Current, CB};
          } else if (N == "vas_cast") {
            Bound[CB] = {nullptr, CB};
          }
          S.Current = afterCall(*CB, S.Current, Switching);
        } else if (auto *LI = dyn_cast<LoadInst>(&I)) {
          auto *K = dyn_cast_or_null<ConstantInt>(S.Current);   // VAS_HOME is 0
          bool AtHome = K && K->isZero();
          if (LI->getType()->isPointerTy() && S.Current && !AtHome) {
            Bound[LI] = {S.Current, LI};
          }
        }
      }
    }
  }

  void check() {
    FunctionCallee Check = M.getOrInsertFunction(
        "exo_vas_deref_check", Type::getVoidTy(M.getContext()),
        Type::getInt32Ty(M.getContext()), PointerType::getUnqual(M.getContext()));
    for (BasicBlock &BB : F) {
      State S = In[&BB];
      SmallVector<std::pair<Instruction *, Value *>, 8> Todo;
      for (Instruction &I : BB) {
        Value *Ptr = nullptr;
        if (auto *LI = dyn_cast<LoadInst>(&I))
          Ptr = LI->getPointerOperand();
        else if (auto *SI = dyn_cast<StoreInst>(&I))
          Ptr = SI->getPointerOperand();
        if (Ptr) {
          const Binding *B = origin(Ptr);
          if (Value *V = B ? B->Vas : nullptr) {
            C.Derefs++;
            if (S.Current == V) {
              C.ProvenSafe++;
            } else {
              Todo.push_back({&I, V});
              if (S.Current) {   // another VAS is current here: certainly wrong
                C.Unsafe++;
                errs() << where(I) << ": warning: exomem VAS safety: dereference of a "
                       << "pointer into the VAS switched in before " << where(*B->Born)
                       << ", while another VAS is current (checked at run time)\n";
              }
            }
          }
        }
        if (auto *CB = dyn_cast<CallBase>(&I))
          S.Current = afterCall(*CB, S.Current, Switching);
      }
      for (auto &[I, V] : Todo) {
        IRBuilder<> B(I);
        Value *Handle = V->getType()->isPointerTy() ? B.CreateLoad(B.getInt32Ty(), V) : V;
        B.CreateCall(Check, {B.CreateZExtOrTrunc(Handle, B.getInt32Ty()), siteString(M, *I)});
        C.Checked++;
      }
    }
  }
};

} // namespace

bool exomem_carat::vasSafetyModule(Module &M, ModuleAnalysisManager &, VasCounts &Counts) {
  SmallPtrSet<const Function *, 16> Switching;
  for (const Function &F : M)
    if (!F.isDeclaration() && mayCallSwitch(F))
      Switching.insert(&F);
  bool Changed = false;
  for (Function &F : M) {
    if (F.isDeclaration() || isRuntimeFunction(F))
      continue;
    FunctionSafety S(F, Counts, Switching);
    S.solve();
    S.bind();
    unsigned Before = Counts.Checked;
    S.check();
    Changed |= Counts.Checked != Before;
  }
  return Changed;
}
