resource "aws_s3_bucket" "logs" {
  bucket = "verifirst-logs"

  tags = {
    Environment = "prod"
    Team        = "platform"
  }
}
