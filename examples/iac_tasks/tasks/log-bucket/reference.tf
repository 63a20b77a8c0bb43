resource "aws_s3_bucket" "logs" {
  bucket = "acme-app-logs"
  tags = {
    owner = "platform"
  }
}

resource "aws_s3_bucket_versioning" "logs" {
  bucket = aws_s3_bucket.logs.id
  versioning_configuration {
    status = "Enabled"
  }
}
