#include "shim/base/job_identity.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace forkguard {
namespace {

using Env = std::map<std::string, std::string>;

const char* Lookup(const char* name, void* ctx) {
  auto* env = static_cast<Env*>(ctx);
  auto it = env->find(name);
  return it == env->end() ? nullptr : it->second.c_str();
}

JobIdentity Read(Env env) { return ReadJobIdentity(Lookup, &env); }

TEST(JobIdentityTest, NothingSetMeansUnknown) {
  JobIdentity id = Read({});
  EXPECT_EQ(id.rank, -1);
  EXPECT_EQ(id.local_rank, -1);
  EXPECT_STREQ(id.job, "");
  EXPECT_EQ(id.step, -1);
  EXPECT_EQ(ReadJobIdentity(nullptr, nullptr).rank, -1);  // AT_SECURE
}

TEST(JobIdentityTest, SlurmStep) {
  JobIdentity id = Read({{"SLURM_PROCID", "3"}, {"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "2"}});
  EXPECT_EQ(id.step, 2);
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(Read({{"SLURM_STEP_ID", "0"}}).step, 0);
  EXPECT_EQ(Read({{"SLURM_STEP_ID", "batch"}}).step, -1);
  EXPECT_EQ(Read({{"RANK", "1"}}).step, -1);
}

TEST(JobIdentityTest, EachLaunchersVariables) {
  struct Case {
    Env env;
    long rank, local_rank;
    const char* job;
  };
  const Case cases[] = {
      {{{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"TORCHELASTIC_RUN_ID", "tr-9"}}, 5, 1, "tr-9"},
      {{{"OMPI_COMM_WORLD_RANK", "7"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}, 7, 3, ""},
      {{{"SLURM_PROCID", "12"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "4242"}}, 12, 0, "4242"},
      {{{"PMI_RANK", "2"}}, 2, -1, ""},
      {{{"PMIX_RANK", "63"}, {"PMIX_NAMESPACE", "prterun-n0-1@1"}}, 63, -1, "prterun-n0-1@1"},
      {{{"PBS_JOBID", "17.pbs"}}, -1, -1, "17.pbs"},
      {{{"LSB_JOBID", "88"}}, -1, -1, "88"},
  };
  for (const Case& c : cases) {
    JobIdentity id = Read(c.env);
    EXPECT_EQ(id.rank, c.rank) << c.job;
    EXPECT_EQ(id.local_rank, c.local_rank) << c.job;
    EXPECT_STREQ(id.job, c.job);
  }
}

TEST(JobIdentityTest, InnermostLauncherFirstAndBadValuesSkipped) {
  // torchrun inside a Slurm step: the worker's RANK, the allocation's job id.
  JobIdentity id = Read({{"RANK", "3"},
                         {"SLURM_PROCID", "0"},
                         {"LOCAL_RANK", "x"},
                         {"SLURM_LOCALID", "1"},
                         {"TORCHELASTIC_RUN_ID", "none"},
                         {"SLURM_JOB_ID", "99"}});
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_STREQ(id.job, "99");
  EXPECT_EQ(Read({{"RANK", "-1"}, {"PMIX_RANK", "4"}}).rank, 4);
  // torchrun's default run id names no job.
  EXPECT_STREQ(Read({{"TORCHELASTIC_RUN_ID", "none"}, {"LSB_JOBID", "5"}}).job, "5");
  EXPECT_STREQ(Read({{"TORCHELASTIC_RUN_ID", "none"}}).job, "");
  EXPECT_EQ(Read({{"RANK", ""}, {"PMI_RANK", "9x"}}).rank, -1);
}

TEST(JobIdentityTest, JobIdIsAFileNameAndBounded) {
  EXPECT_STREQ(Read({{"SLURM_JOB_ID", "a/b c\n"}}).job, "a_b_c_");
  EXPECT_STREQ(Read({{"SLURM_JOB_ID", ".."}}).job, "_.");
  std::string big(500, '7');
  EXPECT_EQ(strlen(Read({{"LSB_JOBID", big}}).job), JobIdentity::kMaxJobLen - 1u);
}

TEST(JobIdentityTest, ShortHostStopsAtTheFirstDot) {
  JobIdentity id;
  SetIdentityHost(id, "node7.cluster.example");
  EXPECT_STREQ(id.host, "node7.cluster.example");
  EXPECT_STREQ(id.short_host, "node7");
  SetIdentityHost(id, "");
  EXPECT_STREQ(id.short_host, "?");
}

}  // namespace
}  // namespace forkguard
