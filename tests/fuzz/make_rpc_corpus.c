/* SPDX-License-Identifier: MIT */
/*
 * make_rpc_corpus.c: writes the seed corpus of fuzz_rpc: a valid request of
 * every method tided serves, each prefixed with the byte that names its
 * method (rpc_methods.h).
 *
 * Submit and Plan carry a real job: the graphs of the client's model
 * builders (tide_model_mlp, a small tide_model_cnn), serialized with
 * tide_builder_serialize, with a loss, an optimizer of each kind, a memory
 * policy, feeds and fetches, as tidectl sends them; the Train seeds feed
 * fuzz_rpc's fixed job (x float32 [4, 8], labels int32 [4]), the
 * WriteVariables seeds its fixed write job. Every method
 * without a builder here gets at least one filled request.
 *
 * Usage: make_rpc_corpus DIR   (DIR is created if it does not exist)
 *
 * Write errors and a method that gets no seed (one added to the proto and
 * not here) exit 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/rpc_methods.h"
#include "tide/models.h"

static const char *out_dir;
static int n_written;
static unsigned char seeded[256];

static _Noreturn void die(const char *what, const char *why)
{
    fprintf(stderr, "make_rpc_corpus: %s: %s\n", what, why ? why : strerror(errno));
    exit(1);
}

/* Writes DIR/<name>.pb: the method's byte, then the packed message. */
static void emit(const ProtobufCServiceDescriptor *service, const char *method,
                 const ProtobufCMessage *m, const char *name)
{
    int byte = fuzz_rpc_byte(service, method);
    if (byte < 0)
        die(method, "tided serves no such method");
    size_t len = protobuf_c_message_get_packed_size(m);
    unsigned char *buf = malloc(len + 1);
    if (!buf)
        die(name, NULL);
    buf[0] = (unsigned char)byte;
    protobuf_c_message_pack(m, buf + 1);
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.pb", out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len + 1, f) != len + 1 || fclose(f) != 0)
        die(path, NULL);
    free(buf);
    seeded[byte] = 1;
    n_written++;
}

/* The serialized graph of a model builder's network with its loss; NULL-free or exit. */
static Tide__V1__Graph *model_graph(bool cnn)
{
    tide_builder *b = tide_builder_new();
    int64_t hidden[] = {16};
    tide_ref logits =
        cnn ? tide_model_cnn(b, 2, 1, 8, 8, 3) : tide_model_mlp(b, 4, 8, hidden, 1, 3);
    uint8_t *bytes;
    size_t len;
    if (logits.id < 0 || tide_builder_serialize(b, &bytes, &len) != 0)
        die(cnn ? "cnn" : "mlp", tide_builder_error(b));
    tide_builder_free(b);
    Tide__V1__Graph *g = tide__v1__graph__unpack(NULL, len, bytes);
    free(bytes);
    if (!g)
        die("model graph", "does not unpack");
    return g;
}

static void seed_jobs(void)
{
    static char *feeds[] = {TIDE_MODEL_IMAGES, TIDE_MODEL_LABELS};
    static char *fetches[] = {TIDE_MODEL_LOGITS, "loss:0"};
    Tide__V1__SGD sgd = TIDE__V1__SGD__INIT;
    Tide__V1__Momentum momentum = TIDE__V1__MOMENTUM__INIT;
    Tide__V1__Adam adam = TIDE__V1__ADAM__INIT;
    sgd.learning_rate = 0.1f;
    momentum.learning_rate = 0.01f;
    momentum.momentum = 0.9f;
    adam.learning_rate = 0.001f;
    Tide__V1__TrainSpec train = TIDE__V1__TRAIN_SPEC__INIT;
    train.loss = TIDE_MODEL_LOSS;
    Tide__V1__MemoryPolicy memory = TIDE__V1__MEMORY_POLICY__INIT;
    memory.device_budget_bytes = (uint64_t)64 << 20;
    memory.partition_size = 4;
    memory.swap = TIDE__V1__SWAP_MODE__SWAP_ON;
    Tide__V1__CheckpointPolicy checkpoint = TIDE__V1__CHECKPOINT_POLICY__INIT;
    checkpoint.every_steps = 10;
    checkpoint.keep = 3;

    Tide__V1__JobSpec spec = TIDE__V1__JOB_SPEC__INIT;
    spec.name = "fuzz seed";
    spec.feeds = feeds;
    spec.n_feeds = 2;
    Tide__V1__SubmitRequest submit = TIDE__V1__SUBMIT_REQUEST__INIT;
    Tide__V1__PlanRequest plan = TIDE__V1__PLAN_REQUEST__INIT;
    submit.spec = plan.spec = &spec;

    for (int cnn = 0; cnn < 2; cnn++) {
        spec.graph = model_graph(cnn);
        /* Inference only: no train, no memory policy. */
        spec.train = NULL;
        spec.memory = NULL;
        emit(&tide__v1__jobs__descriptor, "Submit", &submit.base,
             cnn ? "submit_cnn_infer" : "submit_mlp_infer");
        emit(&tide__v1__jobs__descriptor, "Plan", &plan.base,
             cnn ? "plan_cnn_infer" : "plan_mlp_infer");
        /* Training, one optimizer each, with every optional part set. */
        spec.train = &train;
        spec.memory = &memory;
        spec.checkpoint = &checkpoint;
        spec.fetches = fetches;
        spec.n_fetches = 2;
        spec.seed = 7;
        train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_SGD;
        train.sgd = &sgd;
        emit(&tide__v1__jobs__descriptor, "Submit", &submit.base,
             cnn ? "submit_cnn_sgd" : "submit_mlp_sgd");
        train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_MOMENTUM;
        train.momentum = &momentum;
        emit(&tide__v1__jobs__descriptor, "Plan", &plan.base,
             cnn ? "plan_cnn_momentum" : "plan_mlp_momentum");
        train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_ADAM;
        train.adam = &adam;
        spec.resume_from = "j-0123456789abcdef";
        emit(&tide__v1__jobs__descriptor, "Submit", &submit.base,
             cnn ? "submit_cnn_adam_resume" : "submit_mlp_adam_resume");
        spec.resume_from = "";
        if (!cnn) {
            /* Values streamed after the Submit (WriteVariables). */
            static char *streamed[] = {"fc1/w"};
            spec.streamed_variables = streamed;
            spec.n_streamed_variables = 1;
            emit(&tide__v1__jobs__descriptor, "Submit", &submit.base, "submit_mlp_streamed");
            spec.streamed_variables = NULL;
            spec.n_streamed_variables = 0;
            /* A device asked for (JobSpec.device). */
            Tide__V1__DeviceChoice device = TIDE__V1__DEVICE_CHOICE__INIT;
            device.index = 1;
            spec.device = &device;
            emit(&tide__v1__jobs__descriptor, "Submit", &submit.base, "submit_mlp_device");
            spec.device = NULL;
        }
        spec.checkpoint = NULL;
        spec.fetches = NULL;
        spec.n_fetches = 0;
        tide__v1__graph__free_unpacked(spec.graph, NULL);
    }
}

static void seed_train(void)
{
    float x[4 * 8];
    int32_t labels[4] = {0, 1, 2, 1};
    for (int i = 0; i < 32; i++)
        x[i] = 0.25f * (float)i - 4.0f;
    int64_t x_dims[] = {4, 8}, label_dims[] = {4};
    Tide__V1__TensorShape x_shape = TIDE__V1__TENSOR_SHAPE__INIT;
    Tide__V1__TensorShape label_shape = TIDE__V1__TENSOR_SHAPE__INIT;
    x_shape.dims = x_dims;
    x_shape.n_dims = 2;
    label_shape.dims = label_dims;
    label_shape.n_dims = 1;
    Tide__V1__Tensor x_tensor = TIDE__V1__TENSOR__INIT, label_tensor = TIDE__V1__TENSOR__INIT;
    x_tensor.dtype = TIDE__V1__DATA_TYPE__DT_FLOAT32;
    x_tensor.shape = &x_shape;
    x_tensor.data = (ProtobufCBinaryData){sizeof(x), (uint8_t *)x};
    label_tensor.dtype = TIDE__V1__DATA_TYPE__DT_INT32;
    label_tensor.shape = &label_shape;
    label_tensor.data = (ProtobufCBinaryData){sizeof(labels), (uint8_t *)labels};
    Tide__V1__NamedTensor x_feed = TIDE__V1__NAMED_TENSOR__INIT;
    Tide__V1__NamedTensor label_feed = TIDE__V1__NAMED_TENSOR__INIT;
    x_feed.name = "x";
    x_feed.tensor = &x_tensor;
    label_feed.name = "labels";
    label_feed.tensor = &label_tensor;
    Tide__V1__NamedTensor *feeds[] = {&x_feed, &label_feed};

    Tide__V1__TrainRequest m = TIDE__V1__TRAIN_REQUEST__INIT;
    m.job_id = "j-0123456789abcdef";
    m.feeds = feeds;
    m.n_feeds = 2;
    emit(&tide__v1__jobs__descriptor, "Train", &m.base, "train_first");
    m.job_id = "";
    m.eval_only = true;
    emit(&tide__v1__jobs__descriptor, "Train", &m.base, "train_eval");
    m.eval_only = false;
    m.finish = true;
    emit(&tide__v1__jobs__descriptor, "Train", &m.base, "train_last");
    m.n_feeds = 0;
    emit(&tide__v1__jobs__descriptor, "Train", &m.base, "train_finish");
}

/* VariableChunks of fuzz_rpc's fixed write job ("w" float32 [8, 3], its first 40 bytes written). */
static void seed_write(void)
{
    uint8_t data[56];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 37);
    Tide__V1__VariableChunk m = TIDE__V1__VARIABLE_CHUNK__INIT;
    m.job_id = "j-0123456789abcdef";
    m.name = "w";
    m.offset = 40;
    m.data = (ProtobufCBinaryData){16, data};
    emit(&tide__v1__jobs__descriptor, "WriteVariables", &m.base, "write_first");
    m.job_id = "";
    m.data.len = sizeof(data);
    emit(&tide__v1__jobs__descriptor, "WriteVariables", &m.base, "write_rest");
    m.offset = 0;
    emit(&tide__v1__jobs__descriptor, "WriteVariables", &m.base, "write_again");
    m.name = "b";
    m.offset = 40;
    emit(&tide__v1__jobs__descriptor, "WriteVariables", &m.base, "write_not_streamed");
}

static void seed_others(void)
{
    char *id = "j-0123456789abcdef";
    Tide__V1__GetJobRequest get = TIDE__V1__GET_JOB_REQUEST__INIT;
    get.job_id = id;
    emit(&tide__v1__jobs__descriptor, "Get", &get.base, "get");
    Tide__V1__ListJobsRequest list = TIDE__V1__LIST_JOBS_REQUEST__INIT;
    list.all = true;
    emit(&tide__v1__jobs__descriptor, "List", &list.base, "list");
    Tide__V1__CancelJobRequest cancel = TIDE__V1__CANCEL_JOB_REQUEST__INIT;
    cancel.job_id = id;
    emit(&tide__v1__jobs__descriptor, "Cancel", &cancel.base, "cancel");
    Tide__V1__WatchRequest watch = TIDE__V1__WATCH_REQUEST__INIT;
    watch.job_id = id;
    watch.step_stride = 10;
    emit(&tide__v1__jobs__descriptor, "Watch", &watch.base, "watch");
    Tide__V1__ReadVariablesRequest read = TIDE__V1__READ_VARIABLES_REQUEST__INIT;
    char *names[] = {"fc1/w", "fc_out/b"};
    read.job_id = id;
    read.names = names;
    read.n_names = 2;
    emit(&tide__v1__jobs__descriptor, "ReadVariables", &read.base, "read_variables");
    Tide__V1__CheckpointRequest ckpt = TIDE__V1__CHECKPOINT_REQUEST__INIT;
    ckpt.job_id = id;
    emit(&tide__v1__jobs__descriptor, "Checkpoint", &ckpt.base, "checkpoint");
    Tide__V1__TraceRequest trace = TIDE__V1__TRACE_REQUEST__INIT;
    trace.job_id = id;
    trace.steps = 3;
    emit(&tide__v1__jobs__descriptor, "Trace", &trace.base, "trace");
    Tide__V1__RemoveJobsRequest remove = TIDE__V1__REMOVE_JOBS_REQUEST__INIT;
    char *ids[] = {id, "j-fedcba9876543210"};
    remove.job_ids = ids;
    remove.n_job_ids = 2;
    emit(&tide__v1__jobs__descriptor, "Remove", &remove.base, "remove");
    Tide__V1__RemoveJobsRequest prune = TIDE__V1__REMOVE_JOBS_REQUEST__INIT;
    prune.all_ended = true;
    emit(&tide__v1__jobs__descriptor, "Remove", &prune.base, "remove_all_ended");
    Tide__V1__SetPriorityRequest priority = TIDE__V1__SET_PRIORITY_REQUEST__INIT;
    priority.job_id = id;
    priority.priority = -7;
    emit(&tide__v1__jobs__descriptor, "SetPriority", &priority.base, "set_priority");
    Tide__V1__StatusRequest status = TIDE__V1__STATUS_REQUEST__INIT;
    emit(&tide__v1__daemon__descriptor, "Status", &status.base, "status");
    Grpc__Health__V1__HealthCheckRequest health = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    health.service = "tide.v1.Jobs";
    emit(&grpc__health__v1__health__descriptor, "Check", &health.base, "health_check");
    emit(&grpc__health__v1__health__descriptor, "Watch", &health.base, "health_watch");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST)
        die(out_dir, NULL);
    seed_jobs();
    seed_train();
    seed_write();
    seed_others();
    for (unsigned k = 0; k < fuzz_rpc_n_methods(); k++) {
        if (!seeded[k])
            die(fuzz_rpc_method((uint8_t)k)->name, "no seed for this method; add one here");
    }
    printf("make_rpc_corpus: wrote %d seeds for %u methods to %s\n", n_written,
           fuzz_rpc_n_methods(), out_dir);
    return 0;
}
