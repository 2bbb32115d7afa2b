// SpaceJMP VAS safety across the functions of a module (the per-function analysis is
// VasSafety.cpp; the terms and facts are described in VasSafety.h).
//
// 1. Bottom-up over the call graph (callees first), each function with a body that cannot
//    be replaced at link time gets a summary: whether it may switch, the VAS current at its
//    returns in its own terms (a constant or global handle, the handle passed as an
//    argument, or "the VAS it found": it restores it, or never switches), and the VAS of
//    the pointer it returns. A recursive cycle starts from "returns nothing, switches
//    nothing" and is analysed again until its summaries stop changing (after 32 rounds
//    they are given up for "unknown").
// 2. Top-down (callers first), each function is analysed with those summaries and
//    instrumented. An internal function (local linkage, only called directly, not
//    recursive, not variadic) starts with what all its call sites agree on: the VAS
//    current at entry, and the VAS of each pointer argument.
// Declarations known not to switch (knownNotToSwitch) leave the current VAS as it was; any
// other declaration, and every indirect call, may switch.
#include "VasSafety.h"

#include "llvm/ADT/SCCIterator.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Analysis/CallGraph.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

using namespace llvm;
using namespace exomem_carat;
using namespace exomem_carat::vas;

static cl::opt<bool> OptVasSummaries(
    "carat-vas-summaries", cl::init(false),
    cl::desc("exomem CARAT: print the VAS-safety summaries and entry facts (stderr)"));

// Calls into these never change the current VAS: they make no callbacks into the program
// and no exomem call that switches. Only what is certain; anything else may switch.
static const char *const NotSwitching[] = {
    // exomem: the heaps, the registry calls that do not switch, vcast, the check itself
    "seg_malloc", "seg_calloc", "seg_memalign", "seg_realloc", "seg_free",
    "seg_malloc_usable_size", "seg_set_root", "seg_get_root", "seg_heap_stats",
    "vas_malloc", "vas_calloc", "seg_heap_last_code", "seg_heap_open", "seg_heap_malloc",
    "seg_heap_free", "seg_alloc", "seg_alloc_ex", "seg_find", "seg_ctl", "seg_attach",
    "seg_detach", "vas_create", "vas_find", "vas_clone", "vas_attach", "vas_cast",
    "vas_current", "exo_vas_deref_check", "exomem_strerror", "exomem_errno",
    "exomem_last_error", "exomem_root",
    // libc: memory and strings
    "memcpy", "memmove", "memset", "memcmp", "memchr", "strlen", "strnlen", "strcmp",
    "strncmp", "strcpy", "strncpy", "strcat", "strncat", "strchr", "strrchr", "strstr",
    "strdup", "strndup", "malloc", "calloc", "realloc", "free", "aligned_alloc",
    "posix_memalign", "__errno_location",
    // libc: formatted and plain output (no callbacks)
    "printf", "fprintf", "sprintf", "snprintf", "vprintf", "vfprintf", "vsprintf",
    "vsnprintf", "puts", "fputs", "putchar", "fputc", "putc", "fwrite", "fflush",
    "__printf_chk", "__fprintf_chk", "__sprintf_chk", "__snprintf_chk",
    // the sanitizer build's versions of the memory functions
    "__asan_memcpy", "__asan_memmove", "__asan_memset",
    // libc: conversions
    "atoi", "atol", "atoll", "strtol", "strtoul", "strtoll", "strtoull", "strtod",
};

bool vas::knownNotToSwitch(const Function &F) {
  if (!F.isDeclaration())
    return false;   // a body has a summary instead
  // Switching changes the process's state: a function that touches no memory, or only
  // memory its arguments point to, cannot (LLVM's attributes cover what it calls, too).
  if (F.doesNotAccessMemory() || F.onlyAccessesArgMemory())
    return true;
  static const StringSet<> Names = [] {
    StringSet<> S;
    for (const char *N : NotSwitching)
      S.insert(N);
    return S;
  }();
  return Names.contains(F.getName());
}

// The summary that claims nothing.
static Summary unknownSummary() {
  Summary S;
  S.Returns = S.MaySwitch = true;
  S.Ret = PtrFact{PtrFact::Unknown};
  return S;
}

// Bottom-up: the summaries of one strongly connected component of the call graph.
static void summariseComponent(const std::vector<Function *> &Fs, bool Cycle,
                               ModuleFacts &MF) {
  std::vector<Function *> Own;   // bodies that calls certainly reach
  for (Function *F : Fs)
    if (!F->isInterposable()) {
      Own.push_back(F);
      MF.Summaries[F] = Summary{};   // optimistic start: returns nothing, switches nothing
    }
  for (int Round = 0;; Round++) {
    bool Changed = false;
    for (Function *F : Own) {
      Summary S = summarise(*F, MF);
      if (S != MF.Summaries[F]) {
        MF.Summaries[F] = S;
        Changed = true;
      }
    }
    if (!Changed || !Cycle)
      return;
    if (Round == 32) {
      for (Function *F : Own)
        MF.Summaries[F] = unknownSummary();
      return;
    }
  }
}

// Whether every call of F is a direct call this module can see, so that the call sites
// tell all about its entry. Recursive functions are left out: their own calls would need
// their facts first.
static bool takesCallSiteFacts(const Function &F, const std::set<const Function *> &Cycles) {
  return !F.isDeclaration() && F.hasLocalLinkage() && !F.isVarArg() && !Cycles.count(&F) &&
         !F.hasAddressTaken();
}

static void printTerm(raw_ostream &OS, const Value *T) {
  if (!T)
    OS << "unknown";
  else if (isa<Function>(T))
    OS << "entry";
  else if (auto *K = dyn_cast<ConstantInt>(T))
    OS << K->getSExtValue();
  else if (auto *A = dyn_cast<Argument>(T))
    OS << "arg" << A->getArgNo();
  else
    OS << T->getName();
}

static void printFact(raw_ostream &OS, const PtrFact &P) {
  switch (P.K) {
  case PtrFact::None: OS << "none"; break;
  case PtrFact::Unknown: OS << "unknown"; break;
  case PtrFact::Trusted: OS << "vcast"; break;
  case PtrFact::Vas: printTerm(OS, P.Term); break;
  case PtrFact::SameAsArg: OS << "as-arg" << P.Arg; break;
  }
}

static void printFacts(const Module &M, const ModuleFacts &MF) {
  for (const Function &F : M) {
    if (const Summary *S = MF.summary(&F)) {
      errs() << "exomem VAS summary: " << F.getName() << ": switches "
             << (S->MaySwitch ? "maybe" : "never") << ", returns ";
      if (S->Returns)
        printTerm(errs(), S->Exit);
      else
        errs() << "never";
      errs() << ", pointer ";
      printFact(errs(), S->Ret);
      errs() << "\n";
    }
    auto It = MF.Entry.find(&F);
    if (It != MF.Entry.end() && It->second.Sites) {
      errs() << "exomem VAS entry: " << F.getName() << ": " << It->second.Sites
             << " call sites, current ";
      printTerm(errs(), It->second.Current);
      for (size_t I = 0; I < It->second.Args.size(); I++) {
        errs() << ", arg" << I << " ";
        printFact(errs(), It->second.Args[I]);
      }
      errs() << "\n";
    }
  }
}

bool exomem_carat::vasSafetyModule(Module &M, ModuleAnalysisManager &, VasCounts &Counts) {
  // The components of the call graph, callees first.
  CallGraph CG(M);
  std::vector<std::vector<Function *>> Components;
  std::set<const Function *> Cycles;
  for (auto It = scc_begin(&CG); !It.isAtEnd(); ++It) {
    std::vector<Function *> Fs;
    for (CallGraphNode *N : *It)
      if (Function *F = N->getFunction(); F && !F->isDeclaration())
        Fs.push_back(F);
    if (Fs.empty())
      continue;
    if (It.hasCycle())
      Cycles.insert(Fs.begin(), Fs.end());
    Components.push_back(std::move(Fs));
  }

  ModuleFacts MF;
  for (const std::vector<Function *> &Fs : Components)
    summariseComponent(Fs, Cycles.count(Fs.front()) != 0, MF);
  for (const Function &F : M)
    if (takesCallSiteFacts(F, Cycles))
      MF.Entry[&F];

  bool Changed = false;
  for (auto It = Components.rbegin(); It != Components.rend(); ++It)
    for (Function *F : *It)
      Changed |= instrument(*F, MF, Counts);
  if (OptVasSummaries)
    printFacts(M, MF);
  return Changed;
}
