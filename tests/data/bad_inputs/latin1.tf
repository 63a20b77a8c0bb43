resource "aws_s3_bucket" "b" {
  bucket = "café"
}
