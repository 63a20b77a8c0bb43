provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "disk" {
  name     = "rg-disk"
  location = "westeurope"
}

resource "azurerm_managed_disk" "data" {
  name                 = "disk-data"
  location             = azurerm_resource_group.disk.location
  resource_group_name  = azurerm_resource_group.disk.name
  storage_account_type = "Premium_LRS"
  create_option        = "Empty"
  disk_size_gb         = 256

  tags = {
    backup = "daily"
  }
}
