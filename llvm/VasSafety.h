// SpaceJMP VAS safety: what the per-function analysis (VasSafety.cpp) and the module-level
// part (VasSummary.cpp: call graph, summaries, facts from call sites) share.
//
// A VAS is named, inside one function, by a Value (a "term"):
//   - a ConstantInt: a handle constant (VAS_HOME is 0);
//   - a GlobalVariable: the handle kept in that global (read afresh before each use);
//   - an AllocaInst: the handle kept in that local variable;
//   - an Argument: the handle passed in (by value) as that argument;
//   - the Function itself: the VAS that was current when the function was entered (its
//     "entry VAS"; at run time, vas_current() at entry);
//   - any other value of the function: the handle that value holds.
// nullptr is "unknown". Constants and globals mean the same in every function; the others
// are translated at each call (VasSafety.cpp, fromCallee and toCallee).
#pragma once

#include "Carat.h"

#include <map>
#include <vector>

namespace exomem_carat {
namespace vas {

// Which VAS a pointer belongs to, as a function's summary or a call site states it.
struct PtrFact {
  enum Kind {
    None,      // nothing known yet (no return reached, no call site seen): the optimistic start
    Unknown,   // no single answer
    Trusted,   // vcast: usable in any VAS
    Vas,       // belongs to the VAS named by Term
    SameAsArg  // the pointer passed as argument Arg (with the caller's knowledge of it)
  } K = None;
  llvm::Value *Term = nullptr;
  unsigned Arg = 0;
  bool operator==(const PtrFact &O) const {
    return K == O.K && Term == O.Term && Arg == O.Arg;
  }
  bool operator!=(const PtrFact &O) const { return !(*this == O); }
  // Agreement of two facts: the fact when both say the same, else Unknown.
  void merge(const PtrFact &O) {
    if (K == None)
      *this = O;
    else if (O.K != None && *this != O)
      *this = PtrFact{Unknown};
  }
};

// What a call to a function of the module does, bottom-up (the function's own terms: the
// Function itself, its Arguments, constants, globals).
struct Summary {
  bool Returns = false;    // some return is reachable (false: optimistic start, or never)
  bool MaySwitch = false;  // some call in it may change the current VAS
  llvm::Value *Exit = nullptr;  // the VAS current at every return (nullptr: unknown); the
                                // Function itself: it restores the VAS it found
  PtrFact Ret;             // the VAS of the pointer it returns
  bool operator==(const Summary &O) const {
    return Returns == O.Returns && MaySwitch == O.MaySwitch && Exit == O.Exit && Ret == O.Ret;
  }
  bool operator!=(const Summary &O) const { return !(*this == O); }
};

// Facts about an internal function from all its call sites (top-down, callee's terms).
struct EntryFacts {
  unsigned Sites = 0;
  llvm::Value *Current = nullptr;  // the VAS current at entry (nullptr: unknown)
  std::vector<PtrFact> Args;       // per argument: its VAS (pointer arguments)
  void merge(const EntryFacts &Site) {
    if (Sites++ == 0) {
      Current = Site.Current;
      Args = Site.Args;
      return;
    }
    if (Current != Site.Current)
      Current = nullptr;
    for (size_t I = 0; I < Args.size() && I < Site.Args.size(); I++)
      Args[I].merge(Site.Args[I]);
  }
};

// What the module-level part knows, for the per-function analysis.
struct ModuleFacts {
  std::map<const llvm::Function *, Summary> Summaries;  // functions with a usable body
  std::map<const llvm::Function *, EntryFacts> Entry;   // functions that take call-site facts
  const Summary *summary(const llvm::Function *F) const {
    auto It = Summaries.find(F);
    return It == Summaries.end() ? nullptr : &It->second;
  }
  bool takesFacts(const llvm::Function *F) const { return Entry.count(F) != 0; }
};

// Declarations (libc, exomem) known never to switch the current VAS.
bool knownNotToSwitch(const llvm::Function &F);

// Analyse F with the summaries so far, its entry VAS and arguments unknown: its summary.
Summary summarise(llvm::Function &F, const ModuleFacts &MF);

// Analyse F with its entry facts, give the functions it calls their call-site facts
// (MF.Entry), and insert the checks F needs; returns whether F changed.
bool instrument(llvm::Function &F, ModuleFacts &MF, VasCounts &Counts);

} // namespace vas
} // namespace exomem_carat
