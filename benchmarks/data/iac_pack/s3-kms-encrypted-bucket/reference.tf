resource "aws_kms_key" "bucket" {
  description         = "Key for the reports bucket"
  enable_key_rotation = true
}

resource "aws_s3_bucket" "reports" {
  bucket = "verifirst-reports"
}

resource "aws_s3_bucket_server_side_encryption_configuration" "reports" {
  bucket = aws_s3_bucket.reports.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = aws_kms_key.bucket.arn
    }
  }
}
