// Host tensors: creation, views without copies, reshape view-or-copy, bad arguments.
#include "test_helpers.h"

TEST(Tensor, CreateReadWrite) {
  ctn_tensor *t = make_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(shape_of(t), (std::vector<int64_t>{2, 3}));
  int64_t strides[8];
  CTN_ASSERT_OK(ctn_tensor_strides(t, strides));
  EXPECT_EQ(strides[0], 3);
  EXPECT_EQ(strides[1], 1);
  EXPECT_EQ(read_f32(t), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  float nv[6] = {6, 5, 4, 3, 2, 1};
  CTN_ASSERT_OK(ctn_tensor_write(t, nv, sizeof nv));
  EXPECT_EQ(read_f32(t), (std::vector<float>{6, 5, 4, 3, 2, 1}));
  ctn_tensor_release(t);
}

TEST(Tensor, ZerosWhenNoData) {
  ctn_tensor *t = make_f32({4}, {});
  EXPECT_EQ(read_f32(t), (std::vector<float>{0, 0, 0, 0}));
  ctn_tensor_release(t);
}

TEST(Tensor, SliceIsAViewSharingStorage) {
  ctn_tensor *t = make_f32({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  ctn_tensor *s = nullptr;
  CTN_ASSERT_OK(ctn_tensor_slice(t, 1, 1, -1, 2, &s));  // columns 1 (and 3 excluded by stop=-1 -> 3)
  uint32_t nd;
  int64_t shape[8];
  ctn_tensor_shape(s, &nd, shape);
  EXPECT_EQ(shape[0], 3);
  EXPECT_EQ(shape[1], 1);
  EXPECT_EQ(read_f32(s), (std::vector<float>{1, 5, 9}));
  int32_t contig = 1;
  ctn_tensor_is_contiguous(s, &contig);
  EXPECT_EQ(contig, 0);
  // Writing through the view changes the parent: no copy was made.
  float w[3] = {-1, -5, -9};
  CTN_ASSERT_OK(ctn_tensor_write(s, w, sizeof w));
  EXPECT_EQ(read_f32(t), (std::vector<float>{0, -1, 2, 3, 4, -5, 6, 7, 8, -9, 10, 11}));
  void *p = nullptr;
  EXPECT_EQ(ctn_tensor_data(s, &p), CTN_ERR_STATE);
  EXPECT_EQ(p, nullptr);
  ctn_tensor_release(s);
  ctn_tensor_release(t);
}

TEST(Tensor, PermuteAndReshape) {
  ctn_tensor *t = make_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  int32_t perm[2] = {1, 0};
  ctn_tensor *tt = nullptr;
  CTN_ASSERT_OK(ctn_tensor_permute(t, perm, &tt));
  EXPECT_EQ(read_f32(tt), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  // Reshaping the contiguous source is a view; reshaping the transposed view must copy.
  int64_t flat[1] = {-1};
  ctn_tensor *r1 = nullptr, *r2 = nullptr;
  int32_t copied = -1;
  CTN_ASSERT_OK(ctn_tensor_reshape(t, 1, flat, &r1, &copied));
  EXPECT_EQ(copied, 0);
  CTN_ASSERT_OK(ctn_tensor_reshape(tt, 1, flat, &r2, &copied));
  EXPECT_EQ(copied, 1);
  EXPECT_EQ(read_f32(r2), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  int64_t bad[2] = {4, 2};
  ctn_tensor *r3 = nullptr;
  EXPECT_EQ(ctn_tensor_reshape(t, 2, bad, &r3, nullptr), CTN_ERR_SHAPE);
  EXPECT_EQ(r3, nullptr);
  EXPECT_NE(std::string(ctn_last_error()).find("[2, 3]"), std::string::npos) << ctn_last_error();
  for (auto *x : {t, tt, r1, r2}) ctn_tensor_release(x);
}

TEST(Tensor, BadArguments) {
  ctn_tensor *t = nullptr;
  int64_t shape[2] = {2, -1};
  EXPECT_EQ(ctn_tensor_create(CTN_F32, 2, shape, nullptr, &t), CTN_ERR_SHAPE);
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(ctn_tensor_create(static_cast<ctn_dtype>(42), 0, nullptr, nullptr, &t), CTN_ERR_DTYPE);
  EXPECT_EQ(ctn_tensor_create(CTN_F32, 9, shape, nullptr, &t), CTN_ERR_SHAPE);
  EXPECT_EQ(ctn_tensor_create(CTN_F32, 0, nullptr, nullptr, nullptr), CTN_ERR_INVALID_ARGUMENT);
  ctn_tensor *ok = make_f32({2}, {1, 2});
  float buf[3];
  EXPECT_EQ(ctn_tensor_read(ok, buf, sizeof buf), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("8 bytes"), std::string::npos) << ctn_last_error();
  ctn_tensor *s = nullptr;
  EXPECT_EQ(ctn_tensor_slice(ok, 3, 0, 1, 1, &s), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_tensor_slice(ok, 0, 0, 1, 0, &s), CTN_ERR_INVALID_ARGUMENT);
  int32_t perm[1] = {1};
  EXPECT_EQ(ctn_tensor_permute(ok, perm, &s), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  ctn_tensor_release(ok);
  ctn_tensor_release(nullptr);  // accepted
}

TEST(Tensor, DtypeHelpers) {
  EXPECT_EQ(ctn_dtype_size(CTN_F64), 8u);
  EXPECT_EQ(ctn_dtype_size(CTN_BOOL), 1u);
  EXPECT_STREQ(ctn_dtype_name(CTN_I64), "i64");
  EXPECT_EQ(ctn_abi_version(), static_cast<uint32_t>(CTN_ABI_VERSION));
  EXPECT_STREQ(ctn_status_name(CTN_ERR_SHAPE), "CTN_ERR_SHAPE");
}
