resource "aws_iam_role" "reader" {
  name = "s3-reader"

  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Action    = "sts:AssumeRole"
      Principal = { Service = "ec2.amazonaws.com" }
    }]
  })
}

resource "aws_iam_policy" "read" {
  name = "s3-read-verifirst-data"

  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect   = "Allow"
      Action   = ["s3:GetObject"]
      Resource = "arn:aws:s3:::verifirst-data/*"
    }]
  })
}

resource "aws_iam_role_policy_attachment" "read" {
  role       = aws_iam_role.reader.name
  policy_arn = aws_iam_policy.read.arn
}
