// Status and StatusOr (include/cell/status.h): an error's code and message survive every copy and move, and an OK
// Status (a code and a null message) reads as OK with an empty message.
#include "cell/status.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace cell {
namespace {

TEST(Status, AnOkStatusHasNoMessageAndCopiesAsOk) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), Status::Code::kOk);
  EXPECT_EQ(ok.message(), "");
  EXPECT_EQ(ok.ToString(), "OK");
  Status copy = ok;
  EXPECT_TRUE(copy.ok());
  EXPECT_EQ(copy, Status::OK());
  // FromCode with kOk is OK whatever message came with it.
  EXPECT_TRUE(Status::FromCode(Status::Code::kOk, "ignored").ok());
  EXPECT_EQ(Status::FromCode(Status::Code::kOk, "ignored").message(), "");
}

TEST(Status, AnErrorKeepsItsCodeAndMessageThroughCopiesAndAssignments) {
  const std::string long_message(200, 'x');  // on the heap in any string
  for (const std::string& message : {std::string("short"), long_message}) {
    const Status error = Status::NotFound(message);
    EXPECT_FALSE(error.ok());
    EXPECT_TRUE(error.IsNotFound());
    EXPECT_EQ(error.message(), message);
    EXPECT_EQ(error.ToString(), "NotFound: " + message);

    Status copy(error);
    EXPECT_EQ(copy, error);
    Status assigned = Status::Unavailable("another");
    assigned = error;
    EXPECT_EQ(assigned, error);
    // Copies are independent: overwriting one leaves the others as they were.
    copy = Status::OK();
    EXPECT_TRUE(copy.ok());
    EXPECT_EQ(copy.message(), "");
    EXPECT_EQ(assigned.message(), message);
    EXPECT_EQ(error.message(), message);
  }
}

TEST(Status, AMoveCarriesTheMessageAndLeavesTheCodeWithAnEmptyMessage) {
  Status from = Status::Aborted("record changed while read");
  Status to(std::move(from));
  EXPECT_TRUE(to.IsAborted());
  EXPECT_EQ(to.message(), "record changed while read");
  EXPECT_TRUE(from.IsAborted());  // NOLINT(bugprone-use-after-move): what a moved-from Status holds is specified
  EXPECT_EQ(from.message(), "");

  Status target = Status::Internal("to be replaced");
  target = std::move(to);
  EXPECT_TRUE(target.IsAborted());
  EXPECT_EQ(target.message(), "record changed while read");
  EXPECT_EQ(to.message(), "");  // NOLINT(bugprone-use-after-move)
}

TEST(Status, SelfAssignmentKeepsTheStatus) {
  Status s = Status::Corruption("bad bytes");
  Status& alias = s;
  s = alias;
  EXPECT_EQ(s.ToString(), "Corruption: bad bytes");
  s = std::move(alias);
  EXPECT_EQ(s.ToString(), "Corruption: bad bytes");
}

TEST(Status, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(Status::NotFound("a"), Status::NotFound("a"));
  EXPECT_FALSE(Status::NotFound("a") == Status::NotFound("b"));
  EXPECT_FALSE(Status::NotFound("a") == Status::Unavailable("a"));
  EXPECT_FALSE(Status::NotFound("") == Status::OK());
  // An error without a message is still an error, with an empty message.
  const Status bare = Status::Unavailable("");
  EXPECT_FALSE(bare.ok());
  EXPECT_EQ(bare.message(), "");
  EXPECT_EQ(bare.ToString(), "Unavailable: ");
}

TEST(Status, UnknownWireCodesBecomeInternal) {
  const Status s = Status::FromCode(static_cast<Status::Code>(200), "from the wire");
  EXPECT_EQ(s.code(), Status::Code::kInternal);
  EXPECT_EQ(s.message(), "from the wire");
  EXPECT_EQ(Status::FromCode(Status::Code::kPermissionDenied, "no key").code(), Status::Code::kPermissionDenied);
}

TEST(Status, ManyStatusesInAContainerSurviveItsGrowth) {
  // A vector's growth moves its elements: every message must arrive where it was moved.
  std::vector<Status> all;
  for (int i = 0; i < 1000; ++i) {
    all.push_back(i % 3 == 0 ? Status::OK() : Status::InvalidArgument("number " + std::to_string(i)));
  }
  for (int i = 0; i < 1000; ++i) {
    if (i % 3 == 0) {
      EXPECT_TRUE(all[i].ok()) << i;
    } else {
      EXPECT_EQ(all[i].message(), "number " + std::to_string(i));
    }
  }
}

TEST(StatusOr, HoldsAValueOrTheStatusThatExplainsItsAbsence) {
  StatusOr<std::string> value(std::string("v"));
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "v");
  StatusOr<std::string> error(Status::NotFound("no key 'k'"));
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.status().message(), "no key 'k'");
  StatusOr<std::string> copied = error;
  EXPECT_EQ(copied.status(), error.status());
  StatusOr<std::string> moved = std::move(copied);
  EXPECT_EQ(moved.status().ToString(), "NotFound: no key 'k'");
}

}  // namespace
}  // namespace cell
