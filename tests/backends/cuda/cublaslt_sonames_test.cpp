// SPDX-License-Identifier: Apache-2.0
// The choice of cuBLASLt library (host code: runs in every configuration), through a fake loader:
// the sonames are tried in order, one that loads with a version outside its range is closed and
// passed over, and the reason names every soname passed over and why.
#include "backends/cuda/linear/cublaslt_sonames.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace {

using fusednn::cuda::cublaslt_version_text;
using fusednn::cuda::CublasLtCandidate;
using fusednn::cuda::CublasLtOpened;
using fusednn::cuda::CublasLtPick;
using fusednn::cuda::pick_cublaslt_library;

// The list a CUDA 11 build tries.
const std::vector<CublasLtCandidate> kCuda11Build = {
    {"libcublasLt.so.11", 110000, 120000},
    {"libcublasLt.so.12", 120200, 130000},
};

// A loader over a fixed table of what each soname gives; records what it opened and closed.
struct FakeLoader {
  std::map<std::string, CublasLtOpened> table;
  std::vector<std::string> opened;
  std::vector<void*> closed;

  CublasLtPick pick(const std::vector<CublasLtCandidate>& candidates) {
    return pick_cublaslt_library(
        candidates,
        [this](const char* soname) {
          opened.push_back(soname);
          const auto found = table.find(soname);
          if (found != table.end()) return found->second;
          CublasLtOpened missing;
          missing.error = std::string(soname) + ": cannot open shared object file";
          return missing;
        },
        [this](void* handle) { closed.push_back(handle); });
  }
};

int library_11, library_12;  // their addresses stand for the handles

CublasLtOpened library(void* handle, size_t version) {
  CublasLtOpened opened;
  opened.handle = handle;
  opened.version = version;
  return opened;
}

TEST(CublasLtSonames, TheBuiltMajorsLibraryIsTakenFirst) {
  FakeLoader loader;
  loader.table["libcublasLt.so.11"] = library(&library_11, 110603);
  loader.table["libcublasLt.so.12"] = library(&library_12, 120601);
  const CublasLtPick pick = loader.pick(kCuda11Build);
  EXPECT_EQ(pick.handle, &library_11);
  EXPECT_EQ(pick.candidate, 0u);
  EXPECT_EQ(pick.version, 110603u);
  EXPECT_EQ(pick.reason, "");
  EXPECT_EQ(loader.opened, std::vector<std::string>{"libcublasLt.so.11"});
  EXPECT_TRUE(loader.closed.empty());
}

TEST(CublasLtSonames, CuBlas12IsTakenWhereTheElevenLibraryIsAbsent) {
  FakeLoader loader;
  loader.table["libcublasLt.so.12"] = library(&library_12, 120601);
  const CublasLtPick pick = loader.pick(kCuda11Build);
  EXPECT_EQ(pick.handle, &library_12);
  EXPECT_EQ(pick.candidate, 1u);
  EXPECT_EQ(pick.version, 120601u);
  EXPECT_EQ(pick.reason,
            "cannot load libcublasLt.so.11 (libcublasLt.so.11: cannot open shared object file)");
  EXPECT_EQ(loader.opened, (std::vector<std::string>{"libcublasLt.so.11", "libcublasLt.so.12"}));
  EXPECT_TRUE(loader.closed.empty());
}

TEST(CublasLtSonames, AVersionOutsideItsRangeIsClosedAndRefused) {
  for (size_t version : {size_t{120001}, size_t{120199}, size_t{130000}, size_t{0}}) {
    FakeLoader loader;
    loader.table["libcublasLt.so.12"] = library(&library_12, version);
    const CublasLtPick pick = loader.pick(kCuda11Build);
    EXPECT_EQ(pick.handle, nullptr) << version;
    EXPECT_EQ(loader.closed, std::vector<void*>{&library_12}) << version;
    EXPECT_NE(pick.reason.find("cannot load libcublasLt.so.11 (libcublasLt.so.11: cannot open"),
              std::string::npos)
        << pick.reason;
    EXPECT_NE(pick.reason.find("; libcublasLt.so.12 is cuBLASLt " + cublaslt_version_text(version) +
                               ", outside the 12.2.0 to below 13.0.0 accepted from it"),
              std::string::npos)
        << pick.reason;
  }
}

TEST(CublasLtSonames, TheRangesEndsAreFirstIncludedAndEndExcluded) {
  for (size_t version : {size_t{120200}, size_t{129999}}) {
    FakeLoader loader;
    loader.table["libcublasLt.so.12"] = library(&library_12, version);
    EXPECT_EQ(loader.pick(kCuda11Build).handle, &library_12) << version;
  }
}

TEST(CublasLtSonames, AnElevenLibraryOutsideItsRangeGivesWayToTwelve) {
  FakeLoader loader;
  loader.table["libcublasLt.so.11"] = library(&library_11, 120000);
  loader.table["libcublasLt.so.12"] = library(&library_12, 120900);
  const CublasLtPick pick = loader.pick(kCuda11Build);
  EXPECT_EQ(pick.handle, &library_12);
  EXPECT_EQ(loader.closed, std::vector<void*>{&library_11});
  EXPECT_EQ(pick.reason,
            "libcublasLt.so.11 is cuBLASLt 12.0.0, outside the 11.0.0 to below 12.0.0 accepted "
            "from it");
}

TEST(CublasLtSonames, NoLibraryNamesEverySonameAndItsError) {
  FakeLoader loader;
  CublasLtOpened silent;  // a loader error without text
  loader.table["libcublasLt.so.12"] = silent;
  const CublasLtPick pick = loader.pick(kCuda11Build);
  EXPECT_EQ(pick.handle, nullptr);
  EXPECT_EQ(pick.reason,
            "cannot load libcublasLt.so.11 (libcublasLt.so.11: cannot open shared object file); "
            "cannot load libcublasLt.so.12 (unknown error)");
}

TEST(CublasLtSonames, OneCandidateBuildsTryOnlyTheirOwnMajor) {
  FakeLoader loader;
  loader.table["libcublasLt.so.12"] = library(&library_12, 120601);
  const CublasLtPick pick = loader.pick({{"libcublasLt.so.13", 130000, 140000}});
  EXPECT_EQ(pick.handle, nullptr);
  EXPECT_EQ(loader.opened, std::vector<std::string>{"libcublasLt.so.13"});
  EXPECT_EQ(loader.pick({}).reason, "no cuBLASLt library to try");
}

TEST(CublasLtSonames, VersionText) {
  EXPECT_EQ(cublaslt_version_text(120601), "12.6.1");
  EXPECT_EQ(cublaslt_version_text(111103), "11.11.3");
  EXPECT_EQ(cublaslt_version_text(130000), "13.0.0");
}

}  // namespace
